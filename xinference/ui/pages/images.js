// Images page: text to image for a running image model (POST /v1/images/generations, answered as base64 so the
// images show without a second request), with the prompt, size, count, steps and seed; the progress of the
// running request (GET /v1/requests/{id}/progress), a Stop button (POST /v1/models/{uid}/requests/{id}/abort)
// and a gallery of what was drawn, each image with its seed and a download link.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api } from "../lib/api.js";
import { ErrorBox } from "../lib/components.js";
import { ModelPage, servingOf } from "../lib/model_page.js";

const isImage = servingOf("image");
const SIZES = ["auto", "512x512", "768x768", "1024x1024", "1024x768", "768x1024", "256x256", "64x64"];
const SIZE = /^\s*(\d{2,4})\s*[x*]\s*(\d{2,4})\s*$/i;

/** The request body the form's values make ("" leaves a field to the model); throws on a value the API refuses. */
export function imageRequest(uid, form) {
  const body = { model: uid, prompt: form.prompt, n: Number(form.n) || 1, response_format: "b64_json" };
  if (form.size && form.size !== "auto") {
    if (!SIZE.test(form.size)) throw new Error(`size ${form.size} is not WIDTHxHEIGHT`);
    body.size = form.size.replace("*", "x").replace(/\s/g, "");
  }
  if (String(form.steps).trim()) body.num_inference_steps = Number(form.steps);
  if (String(form.seed).trim()) body.seed = Number(form.seed);
  if (form.negative.trim()) body.negative_prompt = form.negative;
  return body;
}

function newRequestId() {
  return "ui-" + Math.random().toString(36).slice(2) + Date.now().toString(36);
}

function Gallery({ items }) {
  if (!items.length) return null;
  return html`<div class="gallery" data-testid="gallery">
    ${items.map((item, i) => html`<figure class="gallery-item" key=${item.src.length + ":" + i}>
      <img src=${item.src} alt=${item.prompt} data-testid="gallery-image" />
      <figcaption><span class="muted">${item.size} · seed ${item.seed}</span>
        <a class="button" href=${item.src} download=${`image-${item.seed}-${item.index}.png`}
          data-testid="image-download">Download</a></figcaption></figure>`)}
  </div>`;
}

function Generator({ uid }) {
  const [form, setForm] = useState({ prompt: "a watercolor fox", negative: "", size: "auto", n: 1, steps: "", seed: "" });
  const [busy, setBusy] = useState(null);
  const [progress, setProgress] = useState(0);
  const [error, setError] = useState(null);
  const [items, setItems] = useState([]);
  const poll = useRef(null);
  const set = (name) => (e) => setForm({ ...form, [name]: e.target.value });
  useEffect(() => () => poll.current && clearInterval(poll.current), []);
  const run = async () => {
    let body;
    try {
      body = imageRequest(uid, form);
    } catch (err) {
      setError(err);
      return;
    }
    const requestId = newRequestId();
    body.request_id = requestId;
    setBusy(requestId);
    setProgress(0);
    setError(null);
    poll.current = setInterval(() => {
      api(`/v1/requests/${requestId}/progress`).then((p) => setProgress(p.progress)).catch(() => {});
    }, 400);
    try {
      const answer = await api("/v1/images/generations", { method: "POST", body });
      const drawn = answer.data.map((d, index) => ({
        src: "data:image/png;base64," + d.b64_json, seed: answer.seed, size: answer.size, prompt: body.prompt, index,
      }));
      setItems([...drawn, ...items]);
    } catch (err) {
      setError(err);
    } finally {
      clearInterval(poll.current);
      poll.current = null;
      setBusy(null);
    }
  };
  const stop = () => {
    if (busy) api(`/v1/models/${encodeURIComponent(uid)}/requests/${busy}/abort`, { method: "POST", body: {} })
      .catch(setError);
  };
  return html`
    <div class="card" data-testid="image-form">
      <div class="field"><label for="img-prompt">Prompt</label>
        <textarea id="img-prompt" rows="3" value=${form.prompt} onInput=${set("prompt")}
          data-testid="image-prompt"></textarea></div>
      <div class="field"><label for="img-negative">Negative prompt (optional)</label>
        <input id="img-negative" value=${form.negative} onInput=${set("negative")} /></div>
      <div class="grid3">
        <div class="field"><label for="img-size">Size (WIDTHxHEIGHT, multiples of 8)</label>
          <input id="img-size" list="img-sizes" value=${form.size} onInput=${set("size")} data-testid="image-size" />
          <datalist id="img-sizes">${SIZES.map((s) => html`<option value=${s}></option>`)}</datalist></div>
        <div class="field"><label for="img-n">Images (1–10)</label>
          <input id="img-n" type="number" min="1" max="10" value=${form.n} onInput=${set("n")}
            data-testid="image-n" /></div>
        <div class="field"><label for="img-steps">Steps (empty: the model's)</label>
          <input id="img-steps" type="number" min="1" max="200" value=${form.steps} onInput=${set("steps")}
            data-testid="image-steps" /></div>
        <div class="field"><label for="img-seed">Seed (empty: random)</label>
          <input id="img-seed" type="number" min="0" value=${form.seed} onInput=${set("seed")}
            data-testid="image-seed" /></div>
      </div>
      <div class="actions">
        <button class="primary" disabled=${Boolean(busy) || !form.prompt.trim()} onClick=${run}
          data-testid="generate">${busy ? "Generating…" : "Generate"}</button>
        ${busy && html`<button class="danger" onClick=${stop} data-testid="stop-generation">Stop</button>
          <progress max="1" value=${progress} data-testid="image-progress"></progress>
          <span class="muted">${Math.round(progress * 100)}%</span>`}
      </div>
      <${ErrorBox} error=${error} />
    </div>
    <${Gallery} items=${items} />`;
}

const EMPTY = html`No image model is ready.${" "}
  <a href="#/launch">Launch one</a> (sd-turbo is the quickest on a CPU).`;

export function ImagesPage({ arg }) {
  return html`<${ModelPage} arg=${arg} route="images" title="Images" pageClass="images-page" accept=${isImage}
    empty=${EMPTY} render=${(model) => html`<${Generator} key=${model.model_uid} uid=${model.model_uid} />`} />`;
}

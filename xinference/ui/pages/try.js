// Embeddings and rerank try-outs: the cosine similarity matrix of a few inputs, and documents ranked by a query.
import { useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api } from "../lib/api.js";
import { ErrorBox } from "../lib/components.js";
import { ModelPage, servingOf } from "../lib/model_page.js";

const isTryable = servingOf("embedding", "rerank");

export function cosine(a, b) {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i += 1) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

function Embeddings({ uid }) {
  const [text, setText] = useState("A cat sits on the mat.\nA kitten rests on a rug.\nStock markets fell today.");
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const run = async () => {
    const inputs = text.split("\n").map((t) => t.trim()).filter(Boolean).slice(0, 8);
    try {
      const body = await api("/v1/embeddings", { method: "POST", body: { model: uid, input: inputs } });
      const vectors = body.data.map((d) => d.embedding);
      setResult({ inputs, dims: vectors[0] ? vectors[0].length : 0,
        matrix: vectors.map((a) => vectors.map((b) => cosine(a, b))), usage: body.usage });
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  return html`
    <div class="card">
      <div class="field"><label for="inputs">Inputs (one per line, up to 8)</label>
        <textarea id="inputs" rows="5" value=${text} onInput=${(e) => setText(e.target.value)}></textarea></div>
      <div class="actions"><button class="primary" onClick=${run}>Embed</button></div>
      <${ErrorBox} error=${error} />
      ${result && html`<p class="muted">${result.dims} dimensions · cosine similarity</p>
        <div class="table-wrap"><table class="matrix"><thead><tr><th></th>
          ${result.inputs.map((_, i) => html`<th>#${i + 1}</th>`)}</tr></thead><tbody>
          ${result.matrix.map((row, i) => html`<tr><th title=${result.inputs[i]}>#${i + 1} ${result.inputs[i].slice(0, 40)}</th>
            ${row.map((v) => html`<td style=${{ "--v": Math.max(0, v) }} class="cell">${v.toFixed(3)}</td>`)}</tr>`)}
        </tbody></table></div>`}
    </div>`;
}

function Rerank({ uid }) {
  const [query, setQuery] = useState("What do cats like?");
  const [docs, setDocs] = useState("Cats enjoy sleeping in warm places.\nThe bond market rallied.\nDogs like walks.");
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const run = async () => {
    const documents = docs.split("\n").map((t) => t.trim()).filter(Boolean);
    try {
      const body = await api("/v1/rerank", { method: "POST",
        body: { model: uid, query, documents, return_documents: true } });
      setResult(body.results.map((r) => ({ ...r, text: documents[r.index] })));
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  return html`
    <div class="card">
      <div class="field"><label for="query">Query</label>
        <input id="query" value=${query} onInput=${(e) => setQuery(e.target.value)} /></div>
      <div class="field"><label for="docs">Documents (one per line)</label>
        <textarea id="docs" rows="5" value=${docs} onInput=${(e) => setDocs(e.target.value)}></textarea></div>
      <div class="actions"><button class="primary" onClick=${run}>Rank</button></div>
      <${ErrorBox} error=${error} />
      ${result && html`<ol class="ranked">${result.map((r) => html`<li><b>${r.relevance_score.toFixed(4)}</b>${" "}
        ${r.text}</li>`)}</ol>`}
    </div>`;
}

const EMPTY = html`No embedding or rerank model is ready.${" "}
  <a href="#/launch">Launch one</a> (all-MiniLM-L6-v2 ships with the install).`;

export function TryPage({ arg }) {
  const render = (model) => html`
    ${model.model_type === "embedding" && html`<${Embeddings} uid=${model.model_uid} />`}
    ${model.model_type === "rerank" && html`<${Rerank} uid=${model.model_uid} />`}`;
  return html`<${ModelPage} arg=${arg} route="try" title="Embeddings & rerank" pageClass="try-page"
    accept=${isTryable} empty=${EMPTY} render=${render} />`;
}

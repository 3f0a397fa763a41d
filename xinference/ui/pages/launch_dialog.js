// The launch dialog: every engine with its verdict (GET /v1/engines/{type}/{name}); format → size → quantization
// pickers from the chosen engine's accepted specs; replicas, worker, and that worker's GPUs (from the devices of
// GET /v1/cluster/info); the engine's typed options rendered from its JSON schema (GET /v1/engine_schemas); the
// equivalent CLI command; then the launch's live progress.
import { useEffect, useMemo, useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api, request } from "../lib/api.js";
import { CopyButton, ErrorBox, Modal, StatusBadge, usePoll } from "../lib/components.js";
import { buildLaunchCommand } from "../lib/launch_cmd.js";
import { bytes, duration, size, time } from "../lib/format.js";

const unique = (values) => [...new Set(values)];

/** The fields of a JSON schema property that a form needs: kind, choices, default, bounds. */
function describeOption(name, prop) {
  const variants = prop.anyOf ? prop.anyOf.filter((v) => v.type !== "null") : [prop];
  const main = variants[0] || {};
  return {
    name,
    kind: main.enum ? "enum" : main.type || "string",
    choices: main.enum || null,
    min: main.minimum,
    max: main.maximum,
    default: prop.default,
    nullable: Boolean(prop.anyOf && prop.anyOf.some((v) => v.type === "null")),
    help: prop.description || "",
  };
}

function OptionField({ option, value, onChange }) {
  const placeholder = option.default === null || option.default === undefined ? "auto" : String(option.default);
  const id = "opt-" + option.name;
  let input;
  if (option.kind === "boolean") {
    input = html`<select id=${id} value=${value ?? ""} onChange=${(e) => onChange(e.target.value)}>
      <option value="">default (${placeholder})</option><option value="true">true</option>
      <option value="false">false</option></select>`;
  } else if (option.kind === "enum") {
    input = html`<select id=${id} value=${value ?? ""} onChange=${(e) => onChange(e.target.value)}>
      <option value="">default (${placeholder})</option>
      ${option.choices.map((c) => html`<option value=${c}>${c}</option>`)}</select>`;
  } else if (option.kind === "integer" || option.kind === "number") {
    input = html`<input id=${id} type="number" step=${option.kind === "integer" ? 1 : "any"} min=${option.min}
      max=${option.max} placeholder=${placeholder} value=${value ?? ""} onInput=${(e) => onChange(e.target.value)} />`;
  } else if (option.kind === "object" || option.kind === "array") {
    input = html`<input id=${id} type="text" class="mono" placeholder=${option.kind === "object" ? '{"key": value}' : "[...]"}
      value=${value ?? ""} onInput=${(e) => onChange(e.target.value)} />`;
  } else {
    input = html`<input id=${id} type="text" placeholder=${placeholder} value=${value ?? ""}
      onInput=${(e) => onChange(e.target.value)} />`;
  }
  return html`<div class="field"><label for=${id}>${option.name}</label>${input}
    ${option.help && html`<small class="muted">${option.help}</small>`}</div>`;
}

function typedValue(option, text) {
  if (text === "" || text === undefined) return undefined;
  if (option.kind === "boolean") return text === "true";
  if (option.kind === "integer") return parseInt(text, 10);
  if (option.kind === "number") return parseFloat(text);
  if (option.kind === "object" || option.kind === "array") {
    try {
      return JSON.parse(text);
    } catch (_) {
      return text; // sent as typed: the server's 400 names the option
    }
  }
  return text;
}

/** The GPUs of the target worker as checkboxes (name, free memory, the replicas already on it): the indices
 * sent as gpu_idx. The server places GPUs itself when none is checked. With several workers and "any" chosen
 * there is nothing to pick (gpu_idx names one worker's GPUs); a worker without a GPU runs the model on CPU. */
function GpuPicker({ devices, target, picked, onChange }) {
  if (devices.length === 0) {
    return html`<p class="muted" data-testid="gpu-none">none on this cluster: runs on CPU</p>`;
  }
  if (!target) return html`<p class="muted" data-testid="gpu-none">choose a worker to pick its GPUs</p>`;
  const here = devices.filter((d) => d.worker === target);
  if (here.length === 0) return html`<p class="muted" data-testid="gpu-none">none on this worker: runs on CPU</p>`;
  const toggle = (index, on) => onChange(on ? [...picked, index].sort((x, y) => x - y)
    : picked.filter((i) => i !== index));
  return html`<div class="gpu-picks" data-testid="gpu-picks">
    ${here.map((d) => html`<label class="check" style=${{ whiteSpace: "normal" }} data-gpu=${d.index}>
      <input type="checkbox" checked=${picked.includes(d.index)} onChange=${(e) => toggle(d.index, e.target.checked)} />
      #${d.index} ${d.name} · ${bytes(d.memory_total_bytes - d.memory_used_bytes)} free of ${bytes(d.memory_total_bytes)}
      ${(d.models || []).length > 0 ? ` · used by ${d.models.join(", ")}` : ""}</label>`)}
    <small class="muted">${picked.length ? `gpu_idx ${picked.join(",")} on ${target}` : "none checked: placed by the server"}
    </small></div>`;
}

/** The live progress of a launch made with wait_ready=false, until it is ready, failed or cancelled. */
export function LaunchProgress({ uid }) {
  const [gone, setGone] = useState(false);
  const [cancelError, setCancelError] = useState(null);
  const [state] = usePoll(async () => {
    try {
      const model = await api(`/v1/models/${encodeURIComponent(uid)}`);
      const [progress, events] = await Promise.all([
        api(`/v1/models/${encodeURIComponent(uid)}/progress`),
        api(`/v1/models/${encodeURIComponent(uid)}/events`),
      ]);
      return { model, progress, events: events.events };
    } catch (err) {
      if (err.status === 404) setGone(true);
      throw err;
    }
  }, 700, [uid], !gone);
  if (gone) {
    return html`<div class="launch-progress" data-testid="launch-progress">
      <p><strong>${uid}</strong> <${StatusBadge} status="cancelled" /></p>
      <p>The launch of ${uid} was cancelled: it is no longer listed.</p>
      <div class="actions"><a class="button" href="#/running">Running models</a></div></div>`;
  }
  if (!state) return html`<p class="muted">Starting…</p>`;
  const { model, progress, events } = state;
  const status = model.status;
  const failure = status === "failed" ? [...events].reverse().find((e) => e.event === "launch_failed") : null;
  const fraction = Math.max(0, Math.min(1, progress.progress || 0));
  const cancel = async () => {
    try {
      await request(`/v1/models/${encodeURIComponent(uid)}/cancel`, { method: "POST" });
    } catch (err) {
      setCancelError(err);
    }
  };
  return html`
    <div class="launch-progress" data-testid="launch-progress">
      <p><strong>${uid}</strong> <${StatusBadge} status=${status} />
        ${status === "launching" && progress.stage && html`<span class="muted" data-testid="stage"> ${progress.stage}</span>`}</p>
      ${status === "launching" && html`
        <progress max="1" value=${fraction} aria-label="launch progress"></progress>
        <span class="muted">${Math.round(fraction * 100)}%</span>`}
      ${status === "launching" && progress.total_bytes > 0 && html`
        <p class="muted" data-testid="download">${bytes(progress.done_bytes)} of ${bytes(progress.total_bytes)}
          ${progress.bytes_per_second ? ` · ${bytes(progress.bytes_per_second)}/s` : ""}
          ${progress.eta_seconds !== null && progress.eta_seconds !== undefined
            ? ` · ${duration(progress.eta_seconds)} left` : ""}
          ${progress.replicas_wanted > 1 ? ` · replica ${progress.replicas_ready + 1} of ${progress.replicas_wanted}` : ""}
        </p>`}
      ${status === "launching" && (progress.files || []).length > 0 && html`
        <div class="table-wrap"><table class="files" data-testid="files"><thead><tr><th>file</th><th>done</th>
          <th>speed</th><th>left</th></tr></thead><tbody>
          ${progress.files.map((f) => html`<tr><td>${f.name}</td>
            <td>${bytes(f.done_bytes)}${f.total_bytes ? ` / ${bytes(f.total_bytes)}` : ""}</td>
            <td>${f.bytes_per_second ? bytes(f.bytes_per_second) + "/s" : "–"}</td>
            <td>${f.done_bytes === f.total_bytes ? "done" : duration(f.eta_seconds)}</td></tr>`)}
        </tbody></table></div>`}
      ${failure && html`<${ErrorBox} error=${failure.message} />`}
      <${ErrorBox} error=${cancelError} />
      <ol class="events">
        ${events.map((e) => html`<li><span class="muted">${time(e.time)}</span> <b>${e.event}</b> ${e.message}</li>`)}
      </ol>
      <div class="actions">
        ${status === "launching" && html`<button onClick=${cancel}>Cancel launch</button>`}
        ${status === "ready" && (model.model_ability || []).includes("chat")
          && html`<a class="button primary" href=${"#/chat/" + encodeURIComponent(uid)}>Chat with it</a>`}
        ${status === "ready" && model.model_type === "audio"
          && html`<a class="button primary" href=${"#/audio/" + encodeURIComponent(uid)}>Try it</a>`}
        ${status === "ready" && model.model_type === "image"
          && html`<a class="button primary" href=${"#/images/" + encodeURIComponent(uid)}>Try it</a>`}
        <a class="button" href="#/running">Running models</a>
      </div>
    </div>`;
}

export function LaunchDialog({ model, onClose }) {
  const [table, setTable] = useState(null);
  const [schemas, setSchemas] = useState({});
  const [workers, setWorkers] = useState([]);
  const [devices, setDevices] = useState([]);
  const [error, setError] = useState(null);
  const [engine, setEngine] = useState("");
  const [format, setFormat] = useState("");
  const [sizeValue, setSizeValue] = useState("");
  const [quant, setQuant] = useState("");
  const [uid, setUid] = useState(model.model_name);
  const [replica, setReplica] = useState(1);
  const [worker, setWorker] = useState("");
  const [gpus, setGpus] = useState([]);
  const [options, setOptions] = useState({});
  const [ignoreMemory, setIgnoreMemory] = useState(false);
  const [busy, setBusy] = useState(false);
  const [launched, setLaunched] = useState(null);

  useEffect(() => {
    const name = encodeURIComponent(model.model_name);
    api(`/v1/engines/${encodeURIComponent(model.model_type)}/${name}`).then((t) => {
      setTable(t);
      const first = Object.entries(t).find(([, v]) => Array.isArray(v));
      if (first) setEngine(first[0]);
    }).catch(setError);
    api("/v1/engine_schemas").then(setSchemas).catch(setError);
    api("/v1/cluster/info").then((info) => {
      setWorkers(info.workers || []);
      setDevices(info.devices || []);
    }).catch(() => setWorkers([]));
  }, [model.model_name]);

  const accepted = table && Array.isArray(table[engine]) ? table[engine] : [];
  const formats = unique(accepted.map((p) => p.model_format));
  const fmt = formats.includes(format) ? format : formats[0] || "";
  const sizes = unique(accepted.filter((p) => p.model_format === fmt).map((p) => String(p.model_size_in_billions)));
  const sz = sizes.includes(sizeValue) ? sizeValue : sizes[0] || "";
  const entries = accepted.filter((p) => p.model_format === fmt && String(p.model_size_in_billions) === sz);
  const quants = unique(entries.flatMap((p) => p.quantizations));
  const q = quants.includes(quant) ? quant : quants[0] || "";
  const hubs = unique(entries.filter((p) => p.quantizations.includes(q)).map((p) => p.model_hub));

  // The worker whose GPUs can be picked: the one chosen, or the only one.
  const target = worker || (workers.length === 1 ? workers[0].address : "");

  const optionList = useMemo(() => {
    const schema = schemas[engine] && schemas[engine].schema;
    return schema ? Object.entries(schema.properties || {}).map(([n, p]) => describeOption(n, p)) : [];
  }, [schemas, engine]);

  const payload = useMemo(() => {
    const body = {
      model_name: model.model_name,
      model_type: model.model_type,
      model_engine: engine || undefined,
      model_format: fmt || undefined,
      model_size_in_billions: sz || undefined,
      quantization: q || undefined,
      model_uid: uid && uid !== model.model_name ? uid : undefined,
      replica: Number(replica) || 1,
    };
    if (worker) body.worker_ip = worker;
    if (gpus.length) body.gpu_idx = gpus;
    if (ignoreMemory) body.ignore_memory_check = true;
    for (const option of optionList) {
      const value = typedValue(option, options[option.name]);
      if (value !== undefined && !Number.isNaN(value)) body[option.name] = value;
    }
    return body;
  }, [model, engine, fmt, sz, q, uid, replica, worker, gpus, ignoreMemory, options, optionList]);

  const launch = async () => {
    setBusy(true);
    setError(null);
    try {
      const result = await api("/v1/models", { method: "POST", body: payload, query: { wait_ready: "false" } });
      setLaunched(result.model_uid);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return html`
    <${Modal} title=${"Launch " + model.model_name} onClose=${onClose} wide=${true}>
      ${launched ? html`<${LaunchProgress} uid=${launched} />` : html`
      <div class="launch-form">
        <fieldset class="engines"><legend>Engine</legend>
          ${table === null && !error && html`<p class="muted">Asking the workers…</p>`}
          ${table && Object.entries(table).map(([name, verdict]) => {
            const ok = Array.isArray(verdict);
            return html`<label class=${"engine" + (ok ? "" : " disabled")} data-engine=${name}>
              <input type="radio" name="engine" value=${name} checked=${engine === name} disabled=${!ok}
                onChange=${() => { setEngine(name); setOptions({}); }} />
              <b>${name}</b> ${!ok && html`<span class="reason">${verdict}</span>`}</label>`;
          })}
        </fieldset>
        <div class="grid3">
          <div class="field"><label for="fmt">Format</label>
            <select id="fmt" value=${fmt} onChange=${(e) => setFormat(e.target.value)}>
              ${formats.map((f) => html`<option value=${f}>${f}</option>`)}</select></div>
          <div class="field"><label for="size">Size</label>
            <select id="size" value=${sz} onChange=${(e) => setSizeValue(e.target.value)}>
              ${sizes.map((s) => html`<option value=${s}>${size(s)}</option>`)}</select></div>
          <div class="field"><label for="quant">Quantization</label>
            <select id="quant" value=${q} onChange=${(e) => setQuant(e.target.value)}>
              ${quants.map((x) => html`<option value=${x}>${x}</option>`)}</select>
            ${hubs.length > 0 && html`<small class="muted">from ${hubs.join(" or ")}</small>`}</div>
          <div class="field"><label for="uid">Model uid</label>
            <input id="uid" value=${uid} onInput=${(e) => setUid(e.target.value)} /></div>
          <div class="field"><label for="replica">Replicas</label>
            <input id="replica" type="number" min="1" max="64" value=${replica}
              onInput=${(e) => setReplica(e.target.value)} /></div>
          <div class="field"><label for="worker">Worker</label>
            <select id="worker" value=${worker} onChange=${(e) => { setWorker(e.target.value); setGpus([]); }}>
              <option value="">any</option>
              ${workers.map((w) => html`<option value=${w.address}>${w.address}</option>`)}</select></div>
          <div class="field" role="group" aria-labelledby="gpus-label"><label id="gpus-label">GPUs</label>
            <${GpuPicker} devices=${devices} target=${target} picked=${gpus} onChange=${setGpus} /></div>
          <div class="field"><label class="check"><input type="checkbox" checked=${ignoreMemory}
            onChange=${(e) => setIgnoreMemory(e.target.checked)} /> skip the memory check</label></div>
        </div>
        ${optionList.length > 0 && html`
          <details class="engine-options"><summary>${engine} options</summary>
            <div class="grid3">${optionList.map((o) => html`<${OptionField} key=${engine + o.name} option=${o}
              value=${options[o.name]} onChange=${(v) => setOptions({ ...options, [o.name]: v })} />`)}</div>
          </details>`}
        <div class="cli"><span class="muted">Same as CLI:</span>
          <code data-testid="cli-command">${buildLaunchCommand(payload, location.origin)}</code>
          <${CopyButton} text=${buildLaunchCommand(payload, location.origin)} /></div>
        <${ErrorBox} error=${error} />
        <div class="actions">
          <button onClick=${onClose}>Close</button>
          <button class="primary" disabled=${busy || !engine} onClick=${launch} data-testid="launch-button">
            ${busy ? "Launching…" : "Launch"}</button>
        </div>
      </div>`}
    <//>`;
}

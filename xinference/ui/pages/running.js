// Running models: every model the server lists, polled, so a launch from the CLI or a script shows up by itself.
// Terminate, add or remove a replica, open its chat, try-out or logs.
import { useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api, request } from "../lib/api.js";
import { ErrorBox, StatusBadge, usePoll } from "../lib/components.js";
import { bytes, duration } from "../lib/format.js";

const POLL_MS = 1500;

function ConfirmButton({ label, confirm, onConfirm, testid }) {
  const [armed, setArmed] = useState(false);
  if (!armed) return html`<button class="danger" data-testid=${testid} onClick=${() => setArmed(true)}>${label}</button>`;
  return html`<span class="confirm"><button class="danger" data-testid=${testid + "-confirm"}
    onClick=${() => { setArmed(false); onConfirm(); }}>${confirm}</button>
    <button class="ghost" onClick=${() => setArmed(false)}>Keep</button></span>`;
}

function tryLink(model) {
  const abilities = model.model_ability || [];
  if (abilities.includes("chat")) return ["Chat", "#/chat/"];
  if (model.model_type === "embedding" || model.model_type === "rerank") return ["Try", "#/try/"];
  if (model.model_type === "audio") return ["Try", "#/audio/"];
  if (model.model_type === "image") return ["Draw", "#/images/"];
  return null;
}

function ModelRow({ model, now, onError, refresh }) {
  const uid = encodeURIComponent(model.model_uid);
  const act = async (fn) => {
    try {
      await fn();
      refresh();
    } catch (err) {
      onError(err);
    }
  };
  const link = tryLink(model);
  const replicas = model.replicas || [];
  const where = [...new Set(replicas.map((r) => r.worker_address))].join(", ");
  return html`
    <tr data-uid=${model.model_uid}>
      <td><b>${model.model_uid}</b><br /><small class="muted">${model.model_name} · ${model.model_type}</small></td>
      <td><${StatusBadge} status=${model.status} />
        ${model.launch && html`<br /><small class="muted" data-testid="launch-stage">${model.launch.stage || ""}
          ${model.launch.total_bytes ? ` ${Math.round((100 * model.launch.done_bytes) / model.launch.total_bytes)}%` : ""}
          ${model.launch.bytes_per_second ? ` · ${bytes(model.launch.bytes_per_second)}/s` : ""}</small>
          <br /><button class="small" onClick=${() => act(() => request(`/v1/models/${uid}/cancel`, { method: "POST" }))}>
            Cancel</button>`}
        ${model.failure && html`<br /><small class="error" title=${model.failure} data-testid="failure">
          ${model.failure.split("\n")[0].slice(0, 160)}</small>`}</td>
      <td>${model.model_engine}<br /><small class="muted">${model.model_format} ${model.quantization || ""}</small></td>
      <td>${replicas.length}/${model.replica}<br /><small class="muted">${where}
        ${model.accelerators && model.accelerators.length ? " · " + model.accelerators.join(", ") : ""}</small></td>
      <td>${duration(now - model.created)}</td>
      <td>${model.requests_in_flight ?? "–"}</td>
      <td><div class="row-actions">
        ${link && model.status !== "failed" && html`<a class="button small" href=${link[1] + uid}>${link[0]}</a>`}
        <a class="button small" href=${"#/logs/" + uid}>Logs</a>
        <button class="small" title="Add a replica" disabled=${model.status !== "ready" && model.status !== "degraded"}
          onClick=${() => act(() => request(`/v1/models/${uid}/replicas`, { method: "POST", body: { replica: 1 } }))}>
          + replica</button>
        <button class="small" title="Remove the last replica" disabled=${replicas.length < 2}
          onClick=${() => act(() => {
            const last = replicas[replicas.length - 1].replica_uid.split("-").pop();
            return request(`/v1/models/${uid}/replicas/${last}`, { method: "DELETE" });
          })}>− replica</button>
        <${ConfirmButton} label="Terminate" confirm="Terminate now" testid="terminate"
          onConfirm=${() => act(() => request(`/v1/models/${uid}`, { method: "DELETE" }))} />
      </div></td>
    </tr>`;
}

/** The model list, plus what a launching model is doing and why a failed one failed (so a page reload, or a
 * launch made elsewhere, shows the same as the launch dialog would). */
async function loadModels() {
  const body = await api("/v1/models");
  await Promise.all(body.data.map(async (model) => {
    const uid = encodeURIComponent(model.model_uid);
    try {
      if (model.status === "launching") model.launch = await api(`/v1/models/${uid}/progress`);
      if (model.status === "failed") {
        const { events } = await api(`/v1/models/${uid}/events`);
        const last = [...events].reverse().find((e) => e.event === "launch_failed" || e.event === "replica_died");
        model.failure = last ? last.message : "";
      }
    } catch (_) {
      // it changed state meanwhile; the next poll shows it
    }
  }));
  return body;
}

export function RunningPage() {
  const [tick, setTick] = useState(0);
  const [actionError, setActionError] = useState(null);
  const [data, error] = usePoll(loadModels, POLL_MS, [tick]);
  const models = data ? data.data : null;
  const now = Date.now() / 1000;
  return html`
    <section class="page running-page">
      <header class="page-head"><h1>Running models</h1>
        <p class="muted">Refreshed every ${POLL_MS / 1000} s from the server: models launched anywhere appear here.</p>
      </header>
      <${ErrorBox} error=${actionError || error} />
      ${models === null && !error && html`<p class="muted">Loading…</p>`}
      ${models && models.length === 0 && html`<p class="empty" data-testid="no-models">No model is running.${" "}
        <a href="#/launch">Launch one</a>.</p>`}
      ${models && models.length > 0 && html`
        <div class="table-wrap"><table class="models" data-testid="running-table">
          <thead><tr><th>Model</th><th>Status</th><th>Engine</th><th>Replicas</th><th>Uptime</th>
            <th>In flight</th><th></th></tr></thead>
          <tbody>${models.map((m) => html`<${ModelRow} key=${m.model_uid} model=${m} now=${now}
            onError=${setActionError} refresh=${() => { setActionError(null); setTick((t) => t + 1); }} />`)}</tbody>
        </table></div>`}
    </section>`;
}

// Cluster: each worker's CPU, memory and GPUs (with the models holding them), the models on it, and the model
// cache entries on disk, which can be removed.
import { useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api, request } from "../lib/api.js";
import { ErrorBox, usePoll } from "../lib/components.js";
import { bytes } from "../lib/format.js";

function Meter({ used, total, label }) {
  const fraction = total ? Math.min(1, used / total) : 0;
  return html`<div class="meter" title=${label}><div class="meter-fill" style=${{ width: `${fraction * 100}%` }}></div>
    <span>${label}</span></div>`;
}

function Worker({ worker, devices, models }) {
  const hw = worker.hardware || {};
  const here = Object.entries(models).filter(([, reps]) => reps.some((r) => r.worker_address === worker.address));
  return html`
    <article class="card worker" data-worker=${worker.address}>
      <header><h3>${worker.address}</h3>
        <span class="muted">heartbeat ${worker.seconds_since_heartbeat}s ago</span></header>
      <p>${hw.os} ${hw.arch} · ${hw.cpu_count} CPU cores</p>
      <${Meter} used=${hw.ram_total_bytes - hw.ram_free_bytes} total=${hw.ram_total_bytes}
        label=${`RAM ${bytes(hw.ram_total_bytes - hw.ram_free_bytes)} used of ${bytes(hw.ram_total_bytes)}`} />
      <h4>GPUs</h4>
      ${devices.length === 0 ? html`<p class="muted">none</p>` : devices.map((d) => html`
        <div class="gpu"><b>#${d.index} ${d.name}</b>
          <${Meter} used=${d.memory_used_bytes} total=${d.memory_total_bytes}
            label=${`${bytes(d.memory_used_bytes)} / ${bytes(d.memory_total_bytes)}`} />
          ${d.models.length > 0 && html`<small class="muted">held by ${d.models.join(", ")}</small>`}</div>`)}
      <h4>Models</h4>
      ${here.length === 0 ? html`<p class="muted">none</p>`
        : html`<ul>${here.map(([uid, reps]) => html`<li><a href=${"#/logs/" + encodeURIComponent(uid)}>${uid}</a>
          <span class="muted"> ${reps.filter((r) => r.worker_address === worker.address).length} replica(s)</span></li>`)}</ul>`}
    </article>`;
}

export function ClusterPage() {
  const [tick, setTick] = useState(0);
  const [actionError, setActionError] = useState(null);
  const [info, infoError] = usePoll(() => api("/v1/cluster/info"), 3000, []);
  const [cache, cacheError] = usePoll(() => api("/v1/cache/models"), 10000, [tick]);
  const remove = async (entry) => {
    try {
      await request("/v1/cache/models", { method: "DELETE", query: { entry: entry.id, worker_ip: entry.worker } });
      setActionError(null);
      setTick((t) => t + 1);
    } catch (err) {
      setActionError(err);
    }
  };
  const devices = (info && info.devices) || [];
  return html`
    <section class="page cluster-page">
      <header class="page-head"><h1>Cluster</h1></header>
      <${ErrorBox} error=${infoError || cacheError || actionError} />
      <div class="cards">
        ${info && info.workers.map((w) => html`<${Worker} key=${w.address} worker=${w}
          devices=${devices.filter((d) => d.worker === w.address)} models=${info.models} />`)}
      </div>
      <h2>Model cache</h2>
      ${cache && cache.list.length === 0 && html`<p class="muted">The cache is empty (bundled models are read from
        their Python package).</p>`}
      ${cache && cache.list.length > 0 && html`
        <div class="table-wrap"><table><thead><tr><th>Models / entry</th><th>Hub</th><th>Size</th><th>Worker</th><th></th></tr></thead>
          <tbody>${cache.list.map((e) => html`<tr><td>${(e.model_names || []).join(", ") || "–"}<br /><small class="muted">${e.id}</small></td>
            <td>${e.hub}</td>
            <td>${bytes(e.size_bytes)}${e.partial_bytes ? html`<br /><small class="muted">+ ${bytes(e.partial_bytes)}
              unfinished</small>` : ""}</td><td>${e.worker}</td>
            <td><button class="danger small" onClick=${() => remove(e)}>Remove</button></td></tr>`)}</tbody>
        </table></div>`}
    </section>`;
}

// Launch page: the catalog and the custom registrations as cards, with search and filters; each card opens the
// launch dialog (pages/launch_dialog.js).
import { useEffect, useMemo, useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api } from "../lib/api.js";
import { ErrorBox } from "../lib/components.js";
import { LaunchDialog } from "./launch_dialog.js";

const MODEL_TYPES = ["LLM", "embedding", "rerank", "audio", "image"];

async function loadCatalog() {
  const lists = await Promise.all(
    MODEL_TYPES.map((type) => api(`/v1/model_registrations/${type}`, { query: { detailed: "true" } })),
  );
  return lists.flatMap((list, i) => list.map((m) => ({ ...m, model_type: m.model_type || MODEL_TYPES[i] })));
}

async function loadCachedNames() {
  const body = await api("/v1/cache/models");
  return new Set((body.list || []).flatMap((entry) => entry.model_names || []));
}

// Models that run offline come first: weights already in the cache, then weights that ship in a Python package
// (the bundled ones); then the rest in catalog order. Array.prototype.sort is stable, so each group keeps it.
function readiness(model, cached) {
  if (cached.has(model.model_name)) return 0;
  return (model.model_specs || []).some((s) => s.bundled) ? 1 : 2;
}

function ModelCard({ model, cached, onLaunch }) {
  const specs = model.model_specs || [];
  const formats = [...new Set(specs.map((s) => s.model_format))];
  const bundled = specs.some((s) => s.bundled);
  return html`
    <article class="card model-card" data-model=${model.model_name}
      data-bundled=${bundled ? "yes" : "no"}>
      <header>
        <h3>${model.model_name}</h3>
        <span class="badge">${model.model_type}</span>
        ${!model.is_builtin && html`<span class="badge custom">custom</span>`}
        ${cached && html`<span class="badge cached">cached</span>`}
        ${!cached && bundled && html`<span class="badge cached" title="Its weights ship in an installed Python
          package: it launches offline">bundled</span>`}
      </header>
      <p class="desc">${model.model_description || ""}</p>
      <div class="tags">
        ${(model.model_ability || []).map((a) => html`<span class="tag">${a}</span>`)}
        ${formats.map((f) => html`<span class="tag format">${f}</span>`)}
        ${model.context_length && html`<span class="tag">${Math.round(model.context_length / 1024)}k ctx</span>`}
        ${model.dimensions && html`<span class="tag">${model.dimensions} dims</span>`}
      </div>
      <footer><button class="primary" onClick=${() => onLaunch(model)}>Launch</button></footer>
    </article>`;
}

export function LaunchPage() {
  const [catalog, setCatalog] = useState(null);
  const [cached, setCached] = useState(new Set());
  const [error, setError] = useState(null);
  const [search, setSearch] = useState("");
  const [type, setType] = useState("");
  const [ability, setAbility] = useState("");
  const [onlyCached, setOnlyCached] = useState(false);
  const [onlyCustom, setOnlyCustom] = useState(false);
  const [chosen, setChosen] = useState(null);

  useEffect(() => {
    loadCatalog().then(setCatalog).catch(setError);
    loadCachedNames().then(setCached).catch(() => setCached(new Set()));
  }, []);

  const abilities = useMemo(
    () => [...new Set((catalog || []).flatMap((m) => m.model_ability || []))].sort(),
    [catalog],
  );
  const shown = useMemo(() => {
    const words = search.toLowerCase().split(/\s+/).filter(Boolean);
    return (catalog || []).filter((m) => {
      const text = `${m.model_name} ${m.model_description || ""} ${(m.model_ability || []).join(" ")}`.toLowerCase();
      return words.every((w) => text.includes(w))
        && (!type || m.model_type === type)
        && (!ability || (m.model_ability || []).includes(ability))
        && (!onlyCached || cached.has(m.model_name))
        && (!onlyCustom || !m.is_builtin);
    }).sort((a, b) => readiness(a, cached) - readiness(b, cached));
  }, [catalog, cached, search, type, ability, onlyCached, onlyCustom]);

  return html`
    <section class="page launch-page">
      <header class="page-head">
        <h1>Launch a model</h1>
        <p class="muted">Every model this server knows. Launch one, then chat with it from Running models.</p>
      </header>
      <div class="filters">
        <input type="search" placeholder="Search models" value=${search} aria-label="Search models"
          onInput=${(e) => setSearch(e.target.value)} data-testid="model-search" />
        <select value=${type} onChange=${(e) => setType(e.target.value)} aria-label="Model type">
          <option value="">all types</option>
          ${MODEL_TYPES.map((t) => html`<option value=${t}>${t}</option>`)}
        </select>
        <select value=${ability} onChange=${(e) => setAbility(e.target.value)} aria-label="Ability">
          <option value="">any ability</option>
          ${abilities.map((a) => html`<option value=${a}>${a}</option>`)}
        </select>
        <label class="check"><input type="checkbox" checked=${onlyCached}
          onChange=${(e) => setOnlyCached(e.target.checked)} /> cached</label>
        <label class="check"><input type="checkbox" checked=${onlyCustom}
          onChange=${(e) => setOnlyCustom(e.target.checked)} /> custom</label>
      </div>
      <${ErrorBox} error=${error} />
      ${catalog === null && !error && html`<p class="muted">Loading the catalog…</p>`}
      ${catalog !== null && shown.length === 0 && html`<p class="muted">No model matches.</p>`}
      <div class="cards">
        ${shown.map((m) => html`<${ModelCard} key=${m.model_type + m.model_name} model=${m}
          cached=${cached.has(m.model_name)} onLaunch=${setChosen} />`)}
      </div>
      ${chosen && html`<${LaunchDialog} model=${chosen} onClose=${() => setChosen(null)} />`}
    </section>`;
}

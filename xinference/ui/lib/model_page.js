// The frame of a try-out page for one running model (Images, Audio, Embeddings & rerank): the running models
// (GET /v1/models), the one chosen (the route's argument, or else the first the page can use), a head with the
// picker (a choice goes into the route), a note when no model fits, and the page's own part for the chosen model.
import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { api } from "./api.js";
import { ErrorBox, ModelPicker } from "./components.js";

/** A predicate: the model is of one of `types` and answers requests now (a degraded one still does). */
export function servingOf(...types) {
  return (m) => types.includes(m.model_type) && (m.status === "ready" || m.status === "degraded");
}

/** The uid a page starts with: the route's `arg`, or else the first model `accept` takes ("" when none). */
export function firstUid(arg, models, accept) {
  if (arg) return arg;
  const first = models.find(accept);
  return first ? first.model_uid : "";
}

/**
 * `route` is the page's hash route ("images" for #/images/<uid>); `empty` what to say when no model fits;
 * `render(model)` the page's part for the chosen model (called only once it is among the running models).
 */
export function ModelPage({ arg, route, title, pageClass, accept, empty, render }) {
  const [models, setModels] = useState(null);
  const [uid, setUid] = useState(arg || "");
  const [error, setError] = useState(null);
  useEffect(() => {
    api("/v1/models").then((body) => {
      setModels(body.data);
      setUid(firstUid(arg, body.data, accept));
    }).catch(setError);
  }, []);
  const model = (models || []).find((m) => m.model_uid === uid);
  const choose = (v) => {
    setUid(v);
    location.hash = `#/${route}/` + encodeURIComponent(v);
  };
  return html`
    <section class=${`page ${pageClass}`}>
      <header class="page-head row"><h1>${title}</h1>
        <${ModelPicker} models=${models} value=${uid} accept=${accept} onChange=${choose} /></header>
      <${ErrorBox} error=${error} />
      ${models && !models.some(accept) && html`<p class="empty">${empty}</p>`}
      ${model && render(model)}
    </section>`;
}

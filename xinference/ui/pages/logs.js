// Logs: the tail of one model replica's log (GET /v1/models/{uid}/logs), followed live by passing the last
// offset back as `since`.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api } from "../lib/api.js";
import { ErrorBox, ModelPicker } from "../lib/components.js";

const FOLLOW_MS = 1000;
const KEEP_LINES = 5000;

export function LogsPage({ arg }) {
  const [models, setModels] = useState(null);
  const [uid, setUid] = useState(arg || "");
  const [replica, setReplica] = useState("");
  const [log, setLog] = useState({ lines: [], replicas: [], truncated: false, replica_uid: "" });
  const [follow, setFollow] = useState(true);
  const [error, setError] = useState(null);
  const offsetRef = useRef(null);
  const boxRef = useRef(null);

  useEffect(() => {
    api("/v1/models").then((body) => {
      setModels(body.data);
      if (!arg && body.data.length) setUid(body.data[0].model_uid);
    }).catch(setError);
  }, []);

  useEffect(() => {
    if (!uid) return undefined;
    offsetRef.current = null;
    setLog({ lines: [], replicas: [], truncated: false, replica_uid: "" });
    let stopped = false;
    let timer = null;
    const read = async () => {
      try {
        const since = offsetRef.current;
        const piece = await api(`/v1/models/${encodeURIComponent(uid)}/logs`,
          { query: { replica, tail: 500, since: since === null ? undefined : since } });
        if (stopped) return;
        offsetRef.current = piece.offset;
        setError(null);
        setLog((old) => {
          const base = since === null || piece.reset ? [] : old.lines;
          const lines = base.concat(piece.lines).slice(-KEEP_LINES);
          return { ...piece, lines, truncated: since === null ? piece.truncated : old.truncated };
        });
      } catch (err) {
        if (!stopped) setError(err);
      }
      if (!stopped && follow) timer = setTimeout(read, FOLLOW_MS);
    };
    read();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [uid, replica, follow]);

  useEffect(() => {
    if (follow && boxRef.current) boxRef.current.scrollTop = boxRef.current.scrollHeight;
  }, [log, follow]);

  return html`
    <section class="page logs-page">
      <header class="page-head row">
        <h1>Logs</h1>
        <${ModelPicker} models=${models} value=${uid} accept=${() => true}
          onChange=${(v) => { setUid(v); setReplica(""); location.hash = "#/logs/" + encodeURIComponent(v); }} />
        ${log.replicas.length > 1 && html`<label class="inline">Replica
          <select value=${replica || log.replica_uid} onChange=${(e) => setReplica(e.target.value)}>
            ${log.replicas.map((r) => html`<option value=${r}>${r}</option>`)}</select></label>`}
        <label class="check"><input type="checkbox" checked=${follow} onChange=${(e) => setFollow(e.target.checked)} />
          follow</label>
      </header>
      <${ErrorBox} error=${error} />
      ${models && models.length === 0 && html`<p class="empty">No model is running, so there is no log to show.</p>`}
      ${uid && html`
        <p class="muted">${log.replica_uid}${log.worker ? " on " + log.worker : ""}
          ${log.truncated ? " · older lines not shown" : ""}</p>
        <pre class="log" ref=${boxRef} data-testid="log">${log.lines.join("\n")}</pre>`}
    </section>`;
}

// MCP servers: the servers the platform runs or connects to (GET /v1/mcp/servers), polled: transport, status,
// last error and tools (each folded, with its input schema). A URL server can be added and any server removed.
import { useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api, request } from "../lib/api.js";
import { ErrorBox, StatusBadge, usePoll } from "../lib/components.js";

const POLL_MS = 2000;

function Tools({ tools }) {
  if (!tools.length) return html`<span class="muted">none</span>`;
  return html`${tools.map((tool) => html`
    <details class="mcp-tool" data-tool=${tool.name}>
      <summary><code>${tool.name}</code> <span class="muted">${tool.description || ""}</span></summary>
      <pre>${JSON.stringify(tool.input_schema, null, 2)}</pre>
    </details>`)}`;
}

function AddServer({ onAdded, onError }) {
  const [name, setName] = useState("");
  const [url, setUrl] = useState("");
  const submit = async (event) => {
    event.preventDefault();
    try {
      await request("/v1/mcp/servers", { method: "POST", body: { name, url } });
      setName("");
      setUrl("");
      onAdded();
    } catch (err) {
      onError(err);
    }
  };
  return html`
    <form class="row mcp-add" onSubmit=${submit}>
      <input placeholder="name" value=${name} onInput=${(e) => setName(e.target.value)} data-testid="mcp-name"
        aria-label="Server name" />
      <input placeholder="http://host:port/mcp" value=${url} onInput=${(e) => setUrl(e.target.value)}
        data-testid="mcp-url" aria-label="Server URL" size="40" />
      <button class="primary" disabled=${!name || !url} data-testid="mcp-add">Add URL server</button>
    </form>`;
}

export function McpPage() {
  const [error, setError] = useState(null);
  const [tick, setTick] = useState(0);
  const [data, pollError] = usePoll(() => api("/v1/mcp/servers"), POLL_MS, [tick]);
  const servers = (data && data.data) || [];
  const remove = async (name) => {
    try {
      await request("/v1/mcp/servers/" + encodeURIComponent(name), { method: "DELETE" });
      setTick(tick + 1);
    } catch (err) {
      setError(err);
    }
  };
  return html`
    <section class="page mcp-page">
      <header class="page-head row"><h1>MCP servers</h1></header>
      <p class="muted">Tool servers chat requests may use (<code>mcp_servers</code>), from the operator's
        MCP config or added here. The platform's own tools are served at <code>/mcp</code>.</p>
      <${ErrorBox} error=${error || pollError} />
      <${AddServer} onAdded=${() => setTick(tick + 1)} onError=${setError} />
      ${data && !servers.length && html`<p class="empty" data-testid="mcp-empty">No MCP server is configured.</p>`}
      ${servers.length > 0 && html`
        <table class="table" data-testid="mcp-servers">
          <thead><tr><th>Name</th><th>Transport</th><th>Status</th><th>Tools</th><th></th></tr></thead>
          <tbody>${servers.map((s) => html`
            <tr data-server=${s.name}>
              <td><b>${s.name}</b></td>
              <td>${s.transport}</td>
              <td><${StatusBadge} status=${s.status} />
                ${s.last_error && html`<br /><small class="error" data-testid="mcp-error">${s.last_error}</small>`}</td>
              <td><${Tools} tools=${s.tools || []} /></td>
              <td><button class="small danger" onClick=${() => remove(s.name)}>Remove</button></td>
            </tr>`)}</tbody>
        </table>`}
    </section>`;
}

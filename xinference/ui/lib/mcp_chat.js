// MCP on the chat page, kept apart from chat.js: the switch that turns the platform's MCP servers on for the
// conversation (requests then carry mcp_servers: "*"), and the calls the platform ran, folded inside the answer
// (the stream's mcp_call chunks: one when a call starts, one when it ends).
import { useEffect, useState } from "preact/hooks";
import { html } from "./html.js";
import { api } from "./api.js";

/** The request body with the MCP servers turned on (or as it was). */
export function withMcp(body, enabled) {
  return enabled ? { ...body, mcp_servers: "*" } : body;
}

/** Record one mcp_call chunk's call on the reply: a new call, or the end of one already shown. */
export function takeMcpCall(reply, call) {
  const calls = reply.mcpCalls || (reply.mcpCalls = []);
  const at = calls.findIndex((c) => c.id === call.id);
  if (at >= 0) calls[at] = call;
  else calls.push(call);
}

export function McpSwitch({ enabled, setEnabled }) {
  const [count, setCount] = useState(null);
  useEffect(() => {
    api("/v1/mcp/servers").then((body) => setCount(body.data.filter((s) => s.status === "ready").length))
      .catch(() => setCount(0));
  }, []);
  return html`
    <label class="mcp-switch" title="Let the model call the tools of the platform's MCP servers">
      <input type="checkbox" checked=${enabled} disabled=${!count} data-testid="mcp-switch"
        onChange=${(e) => setEnabled(e.target.checked)} />
      MCP tools${count ? ` (${count} server${count > 1 ? "s" : ""})` : ""}</label>`;
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

export function McpCalls({ calls }) {
  if (!calls || !calls.length) return null;
  return html`${calls.map((call) => html`
    <details class=${"mcp-call " + call.status} data-testid="mcp-call" data-status=${call.status}>
      <summary>${call.status === "in_progress" ? "Calling" : call.status === "failed" ? "Failed" : "Called"}${" "}
        <code>${call.name}</code> <span class="muted">on ${call.server}</span></summary>
      <div class="mcp-call-body">
        <div class="muted">arguments</div><pre data-testid="mcp-arguments">${pretty(call.arguments)}</pre>
        ${call.output != null && html`<div class="muted">result</div><pre data-testid="mcp-output">${call.output}</pre>`}
        ${call.error != null && html`<div class="muted">error</div><pre class="error" data-testid="mcp-call-error">${call.error}</pre>`}
      </div>
    </details>`)}`;
}

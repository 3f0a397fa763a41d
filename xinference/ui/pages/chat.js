// Chat playground: streamed with fetch + ReadableStream (Stop aborts the request; the server then frees the slot),
// system prompt and sampling settings, markdown answers, reasoning shown apart, usage and time to first token,
// regenerate, and the same request as code. Images (vision models) are chat_images.js's.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api, request } from "../lib/api.js";
import { CopyButton, ErrorBox, ModelPicker } from "../lib/components.js";
import { readJsonStream } from "../lib/sse.js";
import { renderMarkdown } from "../lib/markdown.js";
import { chatSnippets } from "../lib/snippets.js";
import { AttachButton, Thumbnails, canSee, imageDropHandlers, mergeImages, messageContent, readImages }
  from "./chat_images.js";
import { McpCalls, McpSwitch, takeMcpCall, withMcp } from "../lib/mcp_chat.js";

const isChat = (m) => (m.model_ability || []).includes("chat") && (m.status === "ready" || m.status === "degraded");

function Settings({ settings, setSettings }) {
  const set = (name) => (event) => setSettings({ ...settings, [name]: event.target.value });
  return html`
    <aside class="chat-settings card">
      <div class="field"><label for="system">System prompt</label>
        <textarea id="system" rows="4" value=${settings.system} onInput=${set("system")}
          data-testid="system-prompt"></textarea></div>
      <div class="grid2">
        <div class="field"><label for="temperature">Temperature</label>
          <input id="temperature" type="number" min="0" max="2" step="0.1" value=${settings.temperature}
            onInput=${set("temperature")} data-testid="temperature" /></div>
        <div class="field"><label for="top_p">top_p</label>
          <input id="top_p" type="number" min="0" max="1" step="0.05" value=${settings.top_p}
            onInput=${set("top_p")} /></div>
        <div class="field"><label for="max_tokens">Max tokens</label>
          <input id="max_tokens" type="number" min="1" value=${settings.max_tokens} onInput=${set("max_tokens")}
            data-testid="max-tokens" /></div>
        <div class="field"><label for="seed">Seed</label>
          <input id="seed" type="number" value=${settings.seed} placeholder="random" onInput=${set("seed")} /></div>
      </div>
      <div class="field"><label for="stop">Stop sequences (one per line)</label>
        <textarea id="stop" rows="2" value=${settings.stop} onInput=${set("stop")}></textarea></div>
    </aside>`;
}

function Message({ message }) {
  if (message.role === "user") {
    return html`<div class="msg user" data-role="user">
      <${Thumbnails} images=${message.images} testid="message-images" />
      ${message.content && html`<div class="bubble">${message.content}</div>`}</div>`;
  }
  const stats = message.stats || {};
  return html`
    <div class="msg assistant" data-role="assistant" data-chunks=${stats.chunks || 0} data-done=${message.done ? "1" : "0"}>
      ${message.reasoning && html`<details class="reasoning" open=${!message.content}>
        <summary>Reasoning</summary><div class="reasoning-text">${message.reasoning}</div></details>`}
      <${McpCalls} calls=${message.mcpCalls} />
      <div class="bubble markdown" data-testid="answer"
        dangerouslySetInnerHTML=${{ __html: renderMarkdown(message.content) }}></div>
      ${message.error && html`<${ErrorBox} error=${message.error} />`}
      <div class="msg-stats muted" data-testid="msg-stats">
        ${stats.ttft !== undefined && html`<span>first token ${Math.round(stats.ttft)} ms</span>`}
        ${stats.usage && html`<span>${stats.usage.prompt_tokens} prompt + ${stats.usage.completion_tokens} completion tokens</span>`}
        ${stats.chunks ? html`<span data-testid="chunk-count">${stats.chunks} chunks</span>` : ""}
        ${message.stopped && html`<span>stopped</span>`}
        ${message.finish && html`<span>finish: ${message.finish}</span>`}
      </div>
    </div>`;
}

function CodePanel({ body }) {
  const [tab, setTab] = useState("curl");
  const snippets = chatSnippets(body, location.origin);
  return html`
    <div class="code-panel card" data-testid="code-panel">
      <div class="tabs">${["curl", "openai", "client"].map((t) => html`<button class=${tab === t ? "active" : "ghost"}
        onClick=${() => setTab(t)}>${{ curl: "curl", openai: "OpenAI SDK", client: "Python client" }[t]}</button>`)}
        <${CopyButton} text=${snippets[tab]} /></div>
      <pre><code>${snippets[tab]}</code></pre>
    </div>`;
}

export function ChatPage({ arg }) {
  const [models, setModels] = useState(null);
  const [uid, setUid] = useState(arg || "");
  const [settings, setSettings] = useState({ system: "", temperature: "0.7", top_p: "1", max_tokens: "512",
    stop: "", seed: "" });
  const [messages, setMessages] = useState([]);
  const [input, setInput] = useState("");
  const [images, setImagesState] = useState([]);
  const imagesRef = useRef([]);  // the attachments now, for reads that finish after another attach
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [showCode, setShowCode] = useState(false);
  const [mcpOn, setMcpOn] = useState(false);
  const abortRef = useRef(null);
  const endRef = useRef(null);

  useEffect(() => {
    api("/v1/models").then((body) => {
      setModels(body.data);
      if (!arg) {
        const first = body.data.find(isChat);
        if (first) setUid(first.model_uid);
      }
    }).catch(setError);
    return () => abortRef.current && abortRef.current.abort();
  }, []);
  useEffect(() => {
    if (endRef.current) endRef.current.scrollIntoView({ block: "end" });
  }, [messages]);

  const buildBody = (history) => {
    const body = { model: uid, messages: [], stream: true, stream_options: { include_usage: true } };
    if (settings.system.trim()) body.messages.push({ role: "system", content: settings.system });
    for (const m of history) body.messages.push({ role: m.role, content: messageContent(m.content, m.images) });
    const number = (text, parse) => (text === "" || text === undefined ? undefined : parse(text));
    const fields = {
      temperature: number(settings.temperature, parseFloat),
      top_p: number(settings.top_p, parseFloat),
      max_tokens: number(settings.max_tokens, (t) => parseInt(t, 10)),
      seed: number(settings.seed, (t) => parseInt(t, 10)),
    };
    for (const [k, v] of Object.entries(fields)) if (v !== undefined && !Number.isNaN(v)) body[k] = v;
    const stops = settings.stop.split("\n").filter((s) => s !== "");
    if (stops.length) body.stop = stops;
    return withMcp(body, mcpOn);
  };

  const send = async (history) => {
    const body = buildBody(history);
    const controller = new AbortController();
    abortRef.current = controller;
    const reply = { role: "assistant", content: "", reasoning: "", stats: { chunks: 0 }, done: false };
    const update = () => setMessages([...history, { ...reply, stats: { ...reply.stats },
      mcpCalls: reply.mcpCalls && [...reply.mcpCalls] }]);
    update();
    setBusy(true);
    setError(null);
    const started = performance.now();
    try {
      const response = await request("/v1/chat/completions", { method: "POST", body, signal: controller.signal });
      await readJsonStream(response, (chunk) => {
        reply.stats.chunks += 1;
        if (chunk.mcp_call) takeMcpCall(reply, chunk.mcp_call);
        if (chunk.usage) reply.stats.usage = chunk.usage;
        const choice = chunk.choices && chunk.choices[0];
        if (choice) {
          const delta = choice.delta || {};
          const text = delta.content || "";
          const thought = delta.reasoning_content || "";
          if ((text || thought) && reply.stats.ttft === undefined) reply.stats.ttft = performance.now() - started;
          reply.content += text;
          reply.reasoning += thought;
          if (choice.finish_reason) reply.finish = choice.finish_reason;
        }
        update();
      });
    } catch (err) {
      if (err.name === "AbortError") reply.stopped = true;
      else reply.error = err.message || String(err);
    } finally {
      reply.done = true;
      abortRef.current = null;
      update();
      setBusy(false);
    }
  };

  const vision = canSee((models || []).find((m) => m.model_uid === uid));
  const attached = vision ? images : [];
  const setImages = (next) => {
    imagesRef.current = next;
    setImagesState(next);
  };
  const attach = async (files) => {
    const read = await readImages(files);
    const merged = mergeImages(imagesRef.current, read);  // read after the files: others may have joined
    setImages(merged.images);
    setError(merged.error);
  };
  const submit = (event) => {
    event.preventDefault();
    if ((!input.trim() && !attached.length) || busy || !uid) return;
    const history = [...messages.filter((m) => !m.error), { role: "user", content: input, images: attached }];
    setInput("");
    setImages([]);
    send(history);
  };
  const stop = () => abortRef.current && abortRef.current.abort();
  const regenerate = () => {
    const lastUser = messages.map((m) => m.role).lastIndexOf("user");
    if (lastUser >= 0) send(messages.slice(0, lastUser + 1));
  };
  const chatModels = (models || []).filter(isChat);
  return html`
    <section class="page chat-page">
      <header class="page-head row">
        <h1>Chat</h1>
        <${ModelPicker} models=${models} value=${uid} onChange=${(v) => { setUid(v); location.hash = "#/chat/" + encodeURIComponent(v); }}
          accept=${isChat} />
        <${McpSwitch} enabled=${mcpOn} setEnabled=${setMcpOn} />
        <button class="ghost" onClick=${() => setShowCode(!showCode)} data-testid="view-code">
          ${showCode ? "Hide code" : "View code"}</button>
        <button class="ghost" onClick=${() => setMessages([])} disabled=${busy}>Clear</button>
      </header>
      <${ErrorBox} error=${error} />
      ${models && chatModels.length === 0 && html`<p class="empty">No chat model is ready.${" "}
        <a href="#/launch">Launch one</a> first.</p>`}
      <div class="chat-layout">
        <div class="chat-main">
          ${showCode && html`<${CodePanel} body=${buildBody([...messages.filter((m) => !m.error),
            ...(input || attached.length ? [{ role: "user", content: input, images: attached }] : [])])} />`}
          <div class="messages" data-testid="messages">
            ${messages.length === 0 && html`<p class="muted chat-hint">Answers stream in as the model writes them;
              Stop ends one early. Settings apply to the next message.</p>`}
            ${messages.map((m, i) => html`<${Message} key=${i} message=${m} />`)}
            <div ref=${endRef}></div>
          </div>
          <form class="composer" onSubmit=${submit} ...${imageDropHandlers(vision, attach)}>
            <${Thumbnails} images=${attached} testid="attached-images"
              onRemove=${(i) => setImages(images.filter((_, j) => j !== i))} />
            <textarea rows="3" placeholder=${uid ? `Message ${uid} (Enter to send, Shift+Enter for a new line)` : "Choose a model"}
              value=${input} onInput=${(e) => setInput(e.target.value)} data-testid="chat-input" aria-label="Message"
              onKeyDown=${(e) => { if (e.key === "Enter" && !e.shiftKey) submit(e); }}></textarea>
            <div class="actions">
              ${vision && html`<${AttachButton} onFiles=${attach} disabled=${busy} />`}
              ${busy ? html`<button type="button" class="danger" onClick=${stop} data-testid="stop">Stop</button>`
                : html`<button type="button" onClick=${regenerate} disabled=${!messages.length}>Regenerate</button>
                  <button class="primary" disabled=${!uid || (!input.trim() && !attached.length)}
                    data-testid="send">Send</button>`}
            </div>
          </form>
        </div>
        <${Settings} settings=${settings} setSettings=${setSettings} />
      </div>
    </section>`;
}

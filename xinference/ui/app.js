// The shell of the web UI: sidebar, theme, version, API-key prompt and the hash router that picks a page.
// Each page is a module under pages/; it uses only the public REST API (lib/api.js).
import { render } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { html } from "./lib/html.js";
import { api, apiKey, authRequired, onUnauthorized, setApiKey } from "./lib/api.js";
import { LaunchPage } from "./pages/launch.js";
import { RunningPage } from "./pages/running.js";
import { ChatPage } from "./pages/chat.js";
import { TryPage } from "./pages/try.js";
import { AudioPage } from "./pages/audio.js";
import { ImagesPage } from "./pages/images.js";
import { LogsPage } from "./pages/logs.js";
import { ClusterPage } from "./pages/cluster.js";
import { RegisterPage } from "./pages/register.js";
import { McpPage } from "./pages/mcp.js";

const PAGES = {
  launch: { title: "Launch", component: LaunchPage, nav: true },
  running: { title: "Running models", component: RunningPage, nav: true },
  chat: { title: "Chat", component: ChatPage, nav: true },
  try: { title: "Embeddings & rerank", component: TryPage, nav: true },
  audio: { title: "Audio", component: AudioPage, nav: true },
  images: { title: "Images", component: ImagesPage, nav: true },
  register: { title: "Register a model", component: RegisterPage, nav: true },
  mcp: { title: "MCP servers", component: McpPage, nav: true },
  cluster: { title: "Cluster", component: ClusterPage, nav: true },
  logs: { title: "Logs", component: LogsPage, nav: true },
};

/** "#/chat/my-model" → {page: "chat", arg: "my-model"}. */
export function parseHash(hash) {
  const parts = (hash || "").replace(/^#\/?/, "").split("/");
  const page = PAGES[parts[0]] ? parts[0] : "launch";
  return { page, arg: parts[0] === page && parts[1] ? decodeURIComponent(parts.slice(1).join("/")) : "" };
}

function useRoute() {
  const [route, setRoute] = useState(parseHash(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseHash(location.hash));
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

const THEME_STORAGE = "xinference.theme";

function useTheme() {
  const [choice, setChoice] = useState(localStorage.getItem(THEME_STORAGE) || "system");
  const [systemDark, setSystemDark] = useState(matchMedia("(prefers-color-scheme: dark)").matches);
  useEffect(() => {
    const media = matchMedia("(prefers-color-scheme: dark)");
    const onChange = (event) => setSystemDark(event.matches);
    media.addEventListener("change", onChange);
    return () => media.removeEventListener("change", onChange);
  }, []);
  const effective = choice === "system" ? (systemDark ? "dark" : "light") : choice;
  useEffect(() => {
    document.documentElement.dataset.theme = effective;
    if (choice === "system") localStorage.removeItem(THEME_STORAGE);
    else localStorage.setItem(THEME_STORAGE, choice);
  }, [choice, effective]);
  const toggle = () => setChoice(effective === "dark" ? "light" : "dark");
  return { choice, effective, toggle, follow: () => setChoice("system") };
}

function KeyPrompt({ message, onDone }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState(message || "");
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError("");
    try {
      // Try the key on a harmless call before keeping it.
      const response = await fetch("/v1/models", { headers: { Authorization: "Bearer " + key } });
      if (response.status === 401) {
        const body = await response.json().catch(() => ({}));
        setError((body.error && body.error.message) || "this key was refused");
        return;
      }
      setApiKey(key);
      onDone();
    } catch (err) {
      setError(String(err.message || err));
    } finally {
      setBusy(false);
    }
  };
  return html`
    <div class="modal-backdrop">
      <form class="modal key-prompt" onSubmit=${submit} data-testid="key-prompt">
        <h2>API key</h2>
        <p>This server requires an API key. It is kept in this browser and sent with every request.</p>
        <input type="password" autocomplete="current-password" placeholder="sk-…" value=${key} autofocus
          aria-label="API key" onInput=${(e) => setKey(e.target.value)} />
        ${error && html`<p class="error" role="alert">${error}</p>`}
        <div class="actions"><button class="primary" disabled=${busy || !key}>Use this key</button></div>
      </form>
    </div>`;
}

function Sidebar({ route, theme, version, keyed, onForgetKey }) {
  return html`
    <div class="sidebar-col"><nav class="sidebar" aria-label="Pages">
      <a class="brand" href="#/launch"><span class="logo" aria-hidden="true">✕</span> Xinference</a>
      <ul>
        ${Object.entries(PAGES).filter(([, p]) => p.nav).map(([name, p]) => html`
          <li><a href=${"#/" + name} class=${route.page === name ? "active" : ""}
            aria-current=${route.page === name ? "page" : undefined}>${p.title}</a></li>`)}
      </ul>
      <div class="sidebar-foot">
        <button class="ghost" onClick=${theme.toggle} data-testid="theme-toggle"
          title="Switch theme (double-click: follow the system)" onDblClick=${theme.follow}>
          ${theme.effective === "dark" ? "☾ Dark" : "☀ Light"}${theme.choice === "system" ? " (system)" : ""}
        </button>
        ${keyed && html`<button class="ghost" onClick=${onForgetKey}>Forget API key</button>`}
        <span class="version" data-testid="version">${version ? "v" + version : ""}</span>
      </div>
    </nav></div>`;
}

function App() {
  const route = useRoute();
  const theme = useTheme();
  const [auth, setAuth] = useState({ checked: false, needed: false, prompt: false, message: "" });
  const [version, setVersion] = useState("");

  const loadVersion = useCallback(() => {
    api("/v1/cluster/version").then((v) => setVersion(v.version)).catch(() => {});
  }, []);

  useEffect(() => {
    authRequired()
      .then((needed) => {
        const prompt = needed && !apiKey();
        setAuth({ checked: true, needed, prompt, message: "" });
        if (!prompt) loadVersion();
      })
      .catch((err) => setAuth({ checked: true, needed: false, prompt: false, message: String(err) }));
    return onUnauthorized((err) => setAuth((a) => ({ ...a, needed: true, prompt: true, message: err.message })));
  }, []);

  const page = PAGES[route.page];
  const Page = page.component;
  useEffect(() => {
    document.title = `${page.title} · Xinference`;
  }, [route.page]);

  const forgetKey = () => {
    setApiKey("");
    setAuth((a) => ({ ...a, prompt: true, message: "" }));
  };
  const ready = auth.checked && !auth.prompt;
  return html`
    <div class="shell">
      <${Sidebar} route=${route} theme=${theme} version=${version} keyed=${auth.needed} onForgetKey=${forgetKey} />
      <main class="content" id="main">
        ${ready ? html`<${Page} key=${route.page + "/" + route.arg} arg=${route.arg} />` : html`<p class="muted">…</p>`}
      </main>
      ${auth.prompt && html`<${KeyPrompt} message=${auth.message}
        onDone=${() => { setAuth((a) => ({ ...a, prompt: false, message: "" })); loadVersion(); }} />`}
    </div>`;
}

const root = document.getElementById("app");
root.textContent = ""; // drop the "Loading" placeholder: render() adds to what the container holds
render(html`<${App} />`, root);

// Small components several pages share.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";

export function ErrorBox({ error }) {
  if (!error) return null;
  const text = typeof error === "string" ? error : error.message || String(error);
  return html`<pre class="error-box" role="alert">${text}</pre>`;
}

export function StatusBadge({ status }) {
  return html`<span class=${"badge status-" + status} data-status=${status}>${status}</span>`;
}

export function Modal({ title, onClose, children, wide }) {
  useEffect(() => {
    const onKey = (event) => event.key === "Escape" && onClose();
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [onClose]);
  return html`
    <div class="modal-backdrop" onClick=${(e) => e.target === e.currentTarget && onClose()}>
      <section class=${"modal" + (wide ? " wide" : "")} role="dialog" aria-modal="true" aria-label=${title}>
        <header class="modal-head"><h2>${title}</h2>
          <button class="ghost icon" aria-label="Close" onClick=${onClose}>✕</button></header>
        ${children}
      </section>
    </div>`;
}

/** Call `fn` now and every `ms` while the component is shown, the tab visible and `enabled`; returns
 * [data, error]. */
export function usePoll(fn, ms, deps = [], enabled = true) {
  const [state, setState] = useState({ data: null, error: null });
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    if (!enabled) return undefined;
    let stopped = false;
    let timer = null;
    const tick = async () => {
      if (!document.hidden) {
        try {
          const data = await fnRef.current();
          if (!stopped) setState({ data, error: null });
        } catch (error) {
          if (!stopped && error.name !== "AbortError") setState((s) => ({ data: s.data, error }));
        }
      }
      if (!stopped) timer = setTimeout(tick, ms);
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, enabled]);
  return [state.data, state.error];
}

/** A <select> of running models, filtered by `accept(model)`; empty when none fits. */
export function ModelPicker({ models, value, onChange, accept, label }) {
  const fitting = (models || []).filter(accept);
  return html`
    <label class="inline">${label || "Model"}
      <select value=${value} onChange=${(e) => onChange(e.target.value)} data-testid="model-picker">
        ${!fitting.some((m) => m.model_uid === value) && html`<option value="">choose…</option>`}
        ${fitting.map((m) => html`<option value=${m.model_uid}>${m.model_uid} (${m.status})</option>`)}
      </select>
    </label>`;
}

export function CopyButton({ text }) {
  const [done, setDone] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setDone(true);
      setTimeout(() => setDone(false), 1200);
    } catch (_) {
      setDone(false);
    }
  };
  return html`<button class="ghost small" type="button" onClick=${copy}>${done ? "Copied" : "Copy"}</button>`;
}

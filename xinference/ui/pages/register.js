// Register a model: a form with its live JSON (the same payload as `xinference register`), errors shown at the
// field the server names, and the chat template previewed on a sample conversation, rendered by the server in
// its sandbox (POST /v1/chat_templates/render).
import { cloneElement, isValidElement } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api } from "../lib/api.js";
import { ErrorBox } from "../lib/components.js";

const ABILITIES = { LLM: ["chat", "generate", "tools", "vision", "reasoning"], embedding: ["embed"], rerank: ["rerank"] };
const FORMATS = ["ggufv2", "pytorch", "awq", "gptq", "fp8", "mlx"];
const SAMPLE_TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}"
  + "{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

const splitList = (text) => text.split(",").map((t) => t.trim()).filter(Boolean);

/** The family JSON the form describes (what POST /v1/model_registrations/{type} takes as "model"). */
export function familyFromForm(form) {
  const spec = {
    model_format: form.format,
    model_size_in_billions: /^\d+$/.test(form.size) ? Number(form.size) : form.size,
    quantizations: splitList(form.quantizations),
  };
  if (form.source === "local") spec.model_uri = form.uri;
  else spec.model_id = form.modelId;
  if (form.format === "ggufv2" && form.fileTemplate) spec.model_file_name_template = form.fileTemplate;
  const family = {
    model_name: form.name,
    model_type: form.type,
    model_ability: form.abilities,
    model_description: form.description,
    model_lang: splitList(form.langs),
    model_specs: [spec],
  };
  if (form.contextLength) family.context_length = Number(form.contextLength);
  if (form.type === "LLM" && form.chatTemplate) family.chat_template = form.chatTemplate;
  if (form.type === "LLM" && form.stop) family.stop = splitList(form.stop);
  if (form.type === "embedding" && form.dimensions) family.dimensions = Number(form.dimensions);
  return family;
}

/** Problems found before asking the server, by field. */
function localErrors(form) {
  const errors = {};
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(form.name) || form.name.includes("..")) {
    errors.model_name = "letters, digits, '.', '_' and '-', starting with a letter or digit";
  }
  if (!form.abilities.length) errors.model_ability = "choose at least one ability";
  if (!splitList(form.quantizations).length) errors.quantizations = "at least one (\"none\" for unquantized weights)";
  if (!/^\d+(_\d+)?$/.test(form.size)) errors.model_size_in_billions = "like 7 or 0_5";
  if (form.source === "local" && !form.uri.startsWith("file:///")) errors.model_uri = "a file:///absolute/path";
  if (form.source === "hub" && !/^[\w.-]+\/[\w.-]+$/.test(form.modelId)) errors.model_id = "a repository id like org/name";
  return errors;
}

function Field({ label, name, errors, children }) {
  // The label names its control (for screen readers and tests): the control gets the field's id.
  const id = "reg-" + name;
  const control = isValidElement(children) ? cloneElement(children, { id }) : children;
  return html`<div class="field"><label for=${id}>${label}</label>${control}
    ${errors[name] && html`<span class="field-error" data-field=${name}>${errors[name]}</span>`}</div>`;
}

export function RegisterPage() {
  const [form, setForm] = useState({
    type: "LLM", name: "my-model", description: "", langs: "en", contextLength: "4096", abilities: ["chat"],
    format: "ggufv2", size: "1", quantizations: "Q4_K_M", source: "local", uri: "file:///models/my-model.gguf",
    modelId: "", fileTemplate: "", chatTemplate: SAMPLE_TEMPLATE, stop: "", dimensions: "", persist: true,
  });
  const [serverErrors, setServerErrors] = useState({});
  const [error, setError] = useState(null);
  const [done, setDone] = useState("");
  const [preview, setPreview] = useState({ prompt: "", error: null });
  const set = (name) => (event) => setForm({ ...form, [name]: event.target.value });
  const family = useMemo(() => familyFromForm(form), [form]);
  const errors = { ...localErrors(form), ...serverErrors };
  useEffect(() => setServerErrors({}), [form]); // an edit makes the server's last verdict stale

  useEffect(() => {
    if (form.type !== "LLM" || !form.chatTemplate.trim()) {
      setPreview({ prompt: "", error: null });
      return undefined;
    }
    const first = !preview.prompt && !preview.error;
    const timer = setTimeout(() => {
      api("/v1/chat_templates/render", { method: "POST", body: { chat_template: form.chatTemplate } })
        .then((r) => setPreview({ prompt: r.prompt, error: null }))
        .catch((err) => setPreview({ prompt: "", error: err }));
    }, first ? 0 : 300); // the first preview at once, then after a pause in typing
    return () => clearTimeout(timer);
  }, [form.chatTemplate, form.type]);

  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    setServerErrors({});
    setDone("");
    try {
      await api(`/v1/model_registrations/${form.type}`, { method: "POST",
        body: { model: JSON.stringify(family), persist: form.persist } });
      setDone(`Registered ${form.name}. It is now in the catalog on the Launch page.`);
    } catch (err) {
      const param = err.body && err.body.error && err.body.error.param;
      if (param) setServerErrors({ [param.split(".").pop()]: err.message });
      setError(err);
    }
  };
  const toggleAbility = (a) => setForm({ ...form, abilities: form.abilities.includes(a)
    ? form.abilities.filter((x) => x !== a) : [...form.abilities, a] });
  return html`
    <section class="page register-page">
      <header class="page-head"><h1>Register a model</h1>
        <p class="muted">Your own weights (a local file or folder, or a hub repository) under a name of your choice.</p>
      </header>
      <div class="register-layout">
        <form class="card" onSubmit=${submit}>
          <div class="grid2">
            <${Field} label="Type" name="model_type" errors=${errors}>
              <select value=${form.type} onChange=${(e) => setForm({ ...form, type: e.target.value,
                abilities: [ABILITIES[e.target.value][0]] })}>
                ${Object.keys(ABILITIES).map((t) => html`<option value=${t}>${t}</option>`)}</select><//>
            <${Field} label="Name" name="model_name" errors=${errors}>
              <input value=${form.name} onInput=${set("name")} /><//>
          </div>
          <${Field} label="Description" name="model_description" errors=${errors}>
            <input value=${form.description} onInput=${set("description")} /><//>
          <${Field} label="Abilities" name="model_ability" errors=${errors}>
            <div class="filters">${ABILITIES[form.type].map((a) => html`<label class="check"><input type="checkbox"
              checked=${form.abilities.includes(a)} onChange=${() => toggleAbility(a)} /> ${a}</label>`)}</div><//>
          <div class="grid2">
            <${Field} label="Languages (comma-separated)" name="model_lang" errors=${errors}>
              <input value=${form.langs} onInput=${set("langs")} /><//>
            <${Field} label="Context length" name="context_length" errors=${errors}>
              <input type="number" value=${form.contextLength} onInput=${set("contextLength")} /><//>
            <${Field} label="Format" name="model_format" errors=${errors}>
              <select value=${form.format} onChange=${set("format")}>
                ${FORMATS.map((f) => html`<option value=${f}>${f}</option>`)}</select><//>
            <${Field} label="Size (billions, 0_5 for 0.5)" name="model_size_in_billions" errors=${errors}>
              <input value=${form.size} onInput=${set("size")} /><//>
            <${Field} label="Quantizations (comma-separated)" name="quantizations" errors=${errors}>
              <input value=${form.quantizations} onInput=${set("quantizations")} /><//>
            <${Field} label="Weights" name="source" errors=${errors}>
              <select value=${form.source} onChange=${set("source")}>
                <option value="local">a local path on the workers</option>
                <option value="hub">a hub repository</option></select><//>
          </div>
          ${form.source === "local" ? html`<${Field} label="Local weights (file:///...)" name="model_uri" errors=${errors}>
              <input value=${form.uri} onInput=${set("uri")} /><//>`
            : html`<div class="grid2"><${Field} label="Repository id" name="model_id" errors=${errors}>
              <input value=${form.modelId} placeholder="org/name" onInput=${set("modelId")} /><//>
              ${form.format === "ggufv2" && html`<${Field} label="GGUF file name template" name="model_file_name_template"
                errors=${errors}><input value=${form.fileTemplate} placeholder="model-{quantization}.gguf"
                onInput=${set("fileTemplate")} /><//>`}</div>`}
          ${form.type === "embedding" && html`<${Field} label="Dimensions" name="dimensions" errors=${errors}>
            <input type="number" value=${form.dimensions} onInput=${set("dimensions")} /><//>`}
          ${form.type === "LLM" && html`
            <${Field} label="Chat template (Jinja)" name="chat_template" errors=${errors}>
              <textarea class="mono" rows="6" value=${form.chatTemplate} onInput=${set("chatTemplate")}></textarea><//>
            <${Field} label="Stop words (comma-separated)" name="stop" errors=${errors}>
              <input value=${form.stop} onInput=${set("stop")} /><//>`}
          <label class="check"><input type="checkbox" checked=${form.persist}
            onChange=${(e) => setForm({ ...form, persist: e.target.checked })} /> keep it after a restart</label>
          <${ErrorBox} error=${error} />
          ${done && html`<p class="ok" role="status">${done}</p>`}
          <div class="actions"><button class="primary" disabled=${Object.keys(localErrors(form)).length > 0}>
            Register</button></div>
        </form>
        <div>
          <h2>JSON</h2>
          <pre data-testid="register-json">${JSON.stringify({ model: family, persist: form.persist }, null, 2)}</pre>
          ${form.type === "LLM" && html`<h2>Template preview</h2>
            <p class="muted">A sample conversation, rendered by the server's sandbox.</p>
            ${preview.error ? html`<${ErrorBox} error=${preview.error} />`
              : html`<pre data-testid="template-preview">${preview.prompt}</pre>`}`}
        </div>
      </div>
    </section>`;
}

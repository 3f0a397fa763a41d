// Every call the UI makes goes through here: the public REST API, with the API key (when the server wants one)
// sent as a Bearer token. The key is asked for once and kept in this browser's localStorage.

const KEY_STORAGE = "xinference.apiKey";

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

export function setApiKey(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
}

/** Listeners told when the server answers 401 (the app then asks for a key). */
const unauthorizedListeners = new Set();
export function onUnauthorized(listener) {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export function headers(extra = {}) {
  const out = { ...extra };
  const key = apiKey();
  if (key) out.Authorization = "Bearer " + key;
  return out;
}

/** The message of an error body: OpenAI's {"error": {"message"}}, or Xinference's {"detail"}. */
export function errorMessage(body, fallback) {
  if (body && typeof body === "object") {
    if (body.error && body.error.message) return body.error.message;
    if (typeof body.detail === "string") return body.detail;
    if (Array.isArray(body.detail)) return body.detail.map((d) => d.msg || JSON.stringify(d)).join("; ");
  }
  return fallback;
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  const error = new ApiError(response.status, errorMessage(body, `${response.status} ${response.statusText}`), body);
  if (response.status === 401) unauthorizedListeners.forEach((listener) => listener(error));
  return error;
}

/** fetch() with the key; resolves to the Response when it is 2xx, else rejects with ApiError. */
export async function request(path, { method = "GET", body, signal, query } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") params.set(k, v);
    const text = params.toString();
    if (text) url += (url.includes("?") ? "&" : "?") + text;
  }
  // A FormData body goes as multipart (the browser writes its Content-Type with the boundary); others as JSON.
  const form = typeof FormData !== "undefined" && body instanceof FormData;
  const json = body !== undefined && !form;
  const init = { method, signal, headers: headers(json ? { "Content-Type": "application/json" } : {}) };
  if (body !== undefined) init.body = form ? body : JSON.stringify(body);
  const response = await fetch(url, init);
  if (!response.ok) throw await failure(response);
  return response;
}

/** request() and parse the JSON answer. */
export async function api(path, options = {}) {
  const response = await request(path, options);
  return response.json();
}

/** Is a key needed here? (GET /v1/cluster/auth is the one route open without a key.) */
export async function authRequired() {
  const response = await fetch("/v1/cluster/auth");
  const body = await response.json();
  return Boolean(body.auth);
}

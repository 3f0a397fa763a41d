// The `xinference launch` command equivalent to a launch payload, shown as "same as CLI" in the launch dialog.

// Payload fields that have their own CLI flag, in the order they are printed.
const FLAGS = [
  ["model_name", "-n"],
  ["model_type", "-t"],
  ["model_engine", "-en"],
  ["model_format", "-f"],
  ["model_size_in_billions", "-s"],
  ["quantization", "-q"],
  ["model_uid", "-u"],
  ["replica", "-r"],
  ["n_gpu", "--n-gpu"],
  ["model_path", "--model-path"],
  ["download_hub", "--download-hub"],
];
const DEFAULTS = { model_type: "LLM", replica: 1, n_gpu: "auto" };

/** Quote a word for a POSIX shell only when it needs it. */
export function shellQuote(value) {
  const text = String(value);
  if (/^[A-Za-z0-9_./:@%+=,-]+$/.test(text)) return text;
  return "'" + text.replace(/'/g, "'\\''") + "'";
}

function optionValue(value) {
  if (value === null) return "none";
  if (Array.isArray(value)) return value.join(",");
  return String(value);
}

/**
 * The command line for `payload` (the JSON body of POST /v1/models). Fields without a flag (engine options,
 * worker_ip, gpu_idx) become `--name value` pairs, which the CLI passes through. `endpoint` is added as -e unless
 * it is the CLI's default.
 */
export function buildLaunchCommand(payload, endpoint) {
  const words = ["xinference", "launch"];
  const used = new Set(["wait_ready"]);
  for (const [field, flag] of FLAGS) {
    used.add(field);
    let value = payload[field];
    if (field === "n_gpu" && value === null) value = "none"; // CPU only
    if (value === undefined || value === null || value === "") continue;
    if (DEFAULTS[field] !== undefined && String(DEFAULTS[field]) === String(value)) continue;
    words.push(flag, shellQuote(value));
  }
  for (const [name, value] of Object.entries(payload)) {
    if (used.has(name) || value === undefined || value === "") continue;
    if (Array.isArray(value) && value.length === 0) continue;
    words.push("--" + name, shellQuote(optionValue(value)));
  }
  if (endpoint && endpoint.replace(/\/+$/, "") !== "http://127.0.0.1:9997") {
    words.push("-e", shellQuote(endpoint.replace(/\/+$/, "")));
  }
  return words.join(" ");
}

// "View code": the same chat request for curl, the OpenAI SDK and the Xinference Python client.

function pyValue(value) {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (Array.isArray(value)) return "[" + value.map(pyValue).join(", ") + "]";
  if (typeof value === "object") {
    return "{" + Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pyValue(v)}`).join(", ") + "}";
  }
  return JSON.stringify(value);
}

function pyKwargs(params, indent) {
  return Object.entries(params).map(([k, v]) => `${indent}${k}=${pyValue(v)},`).join("\n");
}

/** {curl, openai, client} for `body` (a chat completion request) sent to `origin`. */
export function chatSnippets(body, origin) {
  const { model, messages, ...params } = body;
  const key = "$XINFERENCE_API_KEY";
  const json = JSON.stringify(body, null, 2).replace(/'/g, "'\\''");
  const curl = `curl ${origin}/v1/chat/completions \\\n  -H "Content-Type: application/json" \\\n`
    + `  -H "Authorization: Bearer ${key}" \\\n  -d '${json}'`;
  const messagesPy = "[\n" + messages.map((m) => `        ${pyValue(m)},`).join("\n") + "\n    ]";
  const openai = `import os\nfrom openai import OpenAI\n\n`
    + `client = OpenAI(base_url="${origin}/v1", api_key=os.environ.get("XINFERENCE_API_KEY", "none"))\n`
    + `response = client.chat.completions.create(\n    model=${pyValue(model)},\n    messages=${messagesPy},\n`
    + `${pyKwargs(params, "    ")}\n)\n`
    + (params.stream ? `for chunk in response:\n    if chunk.choices:\n        print(chunk.choices[0].delta.content or "", end="")\n`
      : `print(response.choices[0].message.content)\n`);
  const config = Object.keys(params).length ? `,\n    generate_config=${pyValue(params)},\n` : "\n";
  const client = `import os\nfrom xinference.client import Client\n\n`
    + `client = Client("${origin}", api_key=os.environ.get("XINFERENCE_API_KEY"))\n`
    + `model = client.get_model(${pyValue(model)})\n`
    + `result = model.chat(\n    ${messagesPy}${config})\n`
    + (params.stream ? `for chunk in result:\n    if chunk["choices"]:\n        print(chunk["choices"][0]["delta"]["content"], end="")\n`
      : `print(result["choices"][0]["message"]["content"])\n`);
  return { curl, openai, client };
}

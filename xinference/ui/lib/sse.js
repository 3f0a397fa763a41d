// Server-sent events over fetch: a parser for the text/event-stream format and a reader for OpenAI-style streams.
// fetch (not EventSource) because chat requests are POSTs with a JSON body and an Authorization header.

/** Incremental parser: push() text as it arrives, get back the complete events it finished. */
export class SseParser {
  constructor() {
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.data = [];
    this.event = "";
    this.id = null;
  }

  /** Feed a piece of the stream; returns [{event, data, id}] for every event it completed. */
  push(text) {
    this.buffer += text;
    const events = [];
    // A line ends at \r\n, \n or \r; keep a trailing \r until we know whether \n follows.
    let match;
    const lineEnd = /\r\n|\n|\r(?!$)/g;
    let start = 0;
    while ((match = lineEnd.exec(this.buffer)) !== null) {
      const line = this.buffer.slice(start, match.index);
      start = match.index + match[0].length;
      const done = this.line(line);
      if (done) events.push(done);
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  /** End of stream: an event not closed by a blank line is dropped, as the format says. */
  finish() {
    const rest = this.buffer.replace(/\r$/, "");
    this.buffer = "";
    const events = [];
    if (rest) {
      const done = this.line(rest);
      if (done) events.push(done);
    }
    this.reset();
    return events;
  }

  line(line) {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return null;
      }
      const done = { event: this.event || "message", data: this.data.join("\n"), id: this.id };
      this.reset();
      return done;
    }
    if (line.startsWith(":")) return null; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id") this.id = value;
    return null;
  }
}

/** Error raised when the server sends an error frame after the stream has started. */
export class StreamError extends Error {}

/**
 * Read an OpenAI-style stream from a fetch Response: calls onData(json) for each `data:` frame until
 * `data: [DONE]`, and returns the number of network reads that carried at least one frame.
 */
export async function readJsonStream(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  let reads = 0;
  const handle = (events) => {
    for (const ev of events) {
      if (ev.data === "[DONE]") return true;
      const payload = JSON.parse(ev.data);
      if (payload && payload.error) {
        throw new StreamError(payload.error.message || JSON.stringify(payload.error));
      }
      onData(payload);
    }
    return false;
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) {
      handle(parser.push(decoder.decode()).concat(parser.finish()));
      return reads;
    }
    const events = parser.push(decoder.decode(value, { stream: true }));
    if (events.length) reads += 1;
    if (handle(events)) {
      reader.cancel().catch(() => {});
      return reads;
    }
  }
}

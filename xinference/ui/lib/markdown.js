// Markdown for chat answers: marked turns it into HTML, DOMPurify removes anything that could run or load.
import { marked } from "marked";
import DOMPurify from "dompurify";

marked.setOptions({ gfm: true, breaks: true });

export function renderMarkdown(text) {
  const raw = marked.parse(text || "", { async: false });
  return DOMPurify.sanitize(raw, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "img", "form", "input"] });
}

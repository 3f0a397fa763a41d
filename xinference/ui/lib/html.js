// htm bound to Preact: every page writes its markup as html`<div>...</div>`.
import { h } from "preact";
import htm from "htm";

export const html = htm.bind(h);

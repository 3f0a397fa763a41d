#!/bin/sh
# Refresh the browser libraries the web UI ships, from the versions pinned in package.json / package-lock.json.
# Node and npm are needed only here: the copies land in xinference/ui/vendor/ and are committed, so installing,
# running and testing Xinference never needs them.
#   cd frontend && ./refresh-vendor.sh        (or: npm run refresh-vendor)
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --ignore-scripts
out=../xinference/ui/vendor
rm -rf "$out"
mkdir -p "$out/licenses"
# ES modules only, named .js so every server sends a JavaScript MIME type; source-map comments dropped (the maps are not shipped).
copy() {  # copy <file in node_modules> <name in vendor/>
    sed '/^\/\/# sourceMappingURL=/d; s#//\# sourceMappingURL=[^ ]*$##' "node_modules/$1" > "$out/$2"
}
copy preact/dist/preact.mjs preact.js
copy preact/hooks/dist/hooks.mjs preact-hooks.js
copy htm/dist/htm.module.js htm.js
copy marked/lib/marked.esm.js marked.js
copy dompurify/dist/purify.es.mjs purify.js
for pkg in preact htm marked dompurify; do
    cp "node_modules/$pkg/LICENSE" "$out/licenses/$pkg.LICENSE"
done
node -e '
const lock = require("./package-lock.json");
const names = ["preact", "htm", "marked", "dompurify"];
const lines = names.map(n => `${n} ${lock.packages["node_modules/" + n].version}`);
require("fs").writeFileSync(process.argv[1], lines.join("\n") + "\n");
' "$out/VERSIONS"
echo "vendored into $out:"; cat "$out/VERSIONS"

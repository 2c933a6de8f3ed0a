#!/usr/bin/env bash
# Builds the DocC reference of the Swift client's public API (NotifBusClient, and
# NotifBusProtocol which it re-exports) with the toolchain's own docc: symbol graphs from
# the compiler, then `docc convert`. No swift-docc-plugin (it cannot be fetched offline).
# Output: .build/docs/<Module>.doccarchive. Fails on any DocC warning in our own docs.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v docc >/dev/null || { echo "docs.sh: docc is not on PATH (it ships with the Swift toolchain)" >&2; exit 1; }
# Graphs live beside the incremental scratch build: a module that was not recompiled
# keeps the graph of its last compile.
graphs=.build/docs-build/symbol-graphs
rm -rf .build/docs
mkdir -p "$graphs" .build/docs
# A scratch folder of its own: the extra compiler flags would otherwise rebuild .build/debug.
# Every step is bounded: a fresh scratch build on a busy machine takes minutes, not more.
build_graphs() {
    timeout 900 swift build --scratch-path .build/docs-build --target NotifBusClient \
        -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs" >/dev/null
}
build_graphs
if [ ! -f "$graphs/NotifBusClient.symbols.json" ] || [ ! -f "$graphs/NotifBusProtocol.symbols.json" ]; then
    # Graphs lost while the build is current: start the scratch build afresh.
    rm -rf .build/docs-build
    mkdir -p "$graphs"
    build_graphs
fi
# Every public symbol the client declares has a /// comment (ARCHITECTURE.md: What the gates hold).
python3 - "$graphs/NotifBusClient.symbols.json" <<'PY'
import json, sys
graph = json.load(open(sys.argv[1]))
bare = [".".join(s["pathComponents"]) for s in graph["symbols"]
        if s.get("accessLevel") in ("public", "open") and not s.get("docComment")
        and "/Sources/NotifBusClient/" in s.get("location", {}).get("uri", "")]
if bare:
    sys.exit("docs.sh: public symbols of NotifBusClient without documentation: " + ", ".join(sorted(bare)))
PY
# docc copies its HTML template (the toolchain's share/docc/render) keeping its files' owner,
# which fails for anyone but the toolchain's owner (root): every page then "doesn't exist".
# It is given a copy of the user's own (DOCC_HTML_DIR).
template=$(dirname "$(dirname "$(readlink -f "$(command -v docc)")")")/share/docc/render
if [ -d "$template" ]; then
    rm -rf .build/docs-render
    cp -R "$template" .build/docs-render
    export DOCC_HTML_DIR=$PWD/.build/docs-render
fi
for module in NotifBusClient NotifBusProtocol; do
    one=.build/docs/graphs-$module
    mkdir -p "$one"
    cp "$graphs/$module".symbols.json "$one"/
    cp "$graphs/$module"@*.symbols.json "$one"/ 2>/dev/null || true
    log=.build/docs/$module.log
    timeout 300 docc convert --additional-symbol-graph-dir "$one" --fallback-display-name "$module" \
        --fallback-bundle-identifier "org.notifbus.$module" --output-path ".build/docs/$module.doccarchive" \
        >"$log" 2>&1 || { cat "$log" >&2; echo "docs.sh: docc failed for $module" >&2; exit 1; }
    if grep -q "warning:" "$log"; then
        cat "$log" >&2
        echo "docs.sh: DocC warnings in $module's documentation" >&2
        exit 1
    fi
    pages=$(find ".build/docs/$module.doccarchive/data/documentation" -name '*.json' | wc -l)
    [ "$pages" -gt 10 ] || { echo "docs.sh: $module's archive has only $pages pages" >&2; exit 1; }
    echo "docs: .build/docs/$module.doccarchive ($pages pages)"
done

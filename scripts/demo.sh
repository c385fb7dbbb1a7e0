#!/usr/bin/env bash
# The demo: publish two releases of examples/, then update the C example program from the
# bundle to release 1 over file:// and to release 2 over a private nginx on 127.0.0.1,
# printing progress, resolved paths and the contents behind them; then two signed releases of
# a third release whose levels are groups, each fetched when the player reaches it; then two
# signed releases of the plugins of examples/plugin, loaded and called by the plugin host before
# and after an update.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
bash "$root/scripts/deps.sh"
bash "$root/scripts/build.sh"

prefix="$root/build/prefix"
demo="$root/build/demo"
rm -rf "$demo"; mkdir -p "$demo"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
export LD_LIBRARY_PATH="$prefix/lib"
cli="$prefix/bin/assetpatch"
source "$root/Tests/e2e/nginx.sh"
trap nginx_stop EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() {  # show URL [ALLOWED_EXIT]: run the example, then print each resolved file's first line
  # The example exits 3 when the update fails and 4 when a name resolves nowhere; anything
  # but the expected status stops the demo.
  local status=0
  "$demo/example" "$demo/data" "$root/examples/bundle" "$1" greeting.txt sub/sample.png levels/level1.json levels/level2.json \
    >"$demo/out.txt" || status=$?
  cat "$demo/out.txt"
  if ((status != ${2:-0})); then echo "demo: the example exited with $status, expected ${2:-0}" >&2; exit 1; fi
  grep -- ' -> /' "$demo/out.txt" | while read -r name _ path; do
    case $path in *.png) printf '   %-20s %s\n' "$name" "$(file -b "$path" 2>/dev/null || echo PNG) ($(stat -c %s "$path") bytes)";;
                  *) printf '   %-20s %s\n' "$name" "$(head -1 "$path")";; esac
  done
}

step "build the C example against the installed library: cc example.c \$(pkg-config --cflags --libs assetpatch)"
cc -Wall "$root/bindings/c/example.c" $(pkg-config --cflags --libs assetpatch) -o "$demo/example"

step "publish release 1 of examples/v1"
"$cli" publish "$root/examples/v1" --repo "$demo/repo" --package demo-game --label "first release"
"$cli" verify "$demo/repo"

step "before any update: everything resolves from the shipped bundle"
"$cli" resolve --data-dir "$demo/data" --bundle-dir "$root/examples/bundle" --variants "@3x,@2x," greeting.txt sub/sample.png
head -1 "$root/examples/bundle/greeting.txt"

step "update over file:// (the embedded default) and resolve"
show "file://$demo/repo/head.json" 4   # levels/level2.json arrives with release 2

step "publish release 2 (winter event) and serve the repository with nginx on 127.0.0.1"
"$cli" publish "$root/examples/v2" --repo "$demo/repo" --label "winter event"
nginx_start "$demo" "$demo/nginx"
url="http://127.0.0.1:$NGINX_PORT/repo/head.json"
"$cli" inspect "$url"

step "update over HTTP: contents and paths change; sub/sample.png now resolves to the @3x variant"
show "$url"

step "run again: nothing new"
show "$url" >/dev/null
grep -E 'no update|updated' "$demo/out.txt"
"$cli" status --data-dir "$demo/data"

step "content on demand: release 3 puts each level in a group; a level is fetched when the player reaches it"
cc -Wall "$root/examples/ondemand/level.c" $(pkg-config --cflags --libs assetpatch) -o "$demo/level"
rm -rf "$demo/v3"; cp -r "$root/examples/v2" "$demo/v3"; mkdir -p "$demo/v3/levels/level2"
head -c 3000000 /dev/urandom >"$demo/v3/levels/level2/terrain.bin"
"$cli" publish "$demo/v3" --repo "$demo/repo" --label "levels on demand" --group 'level1=levels/level1*' --group 'level2=levels/level2*'
"$demo/level" "$demo/level-data" "$url" 1 2
"$cli" groups --data-dir "$demo/level-data"

step "plugins: a C plugin and a C++ class plugin, built in two versions by CMake (examples/plugin)"
cmake -S "$root/examples/plugin" -B "$demo/plugin" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$demo/plugin" >/dev/null
"$cli" keygen --out "$demo/plugin-key"
pub=$(cat "$demo/plugin-key.pub")
plugin_release() {  # plugin_release VERSION: publish a signed release with both plugins of that version
  local src="$demo/plugin-src$1"
  mkdir -p "$src/plugins"
  cp "$demo/plugin/v$1/greeter.so" "$demo/plugin/v$1/shape.so" "$src/plugins/"
  "$cli" publish "$src" --repo "$demo/plugrepo" --package demo-plugins --key "$demo/plugin-key" --label "plugins $1" \
    --plugin greeter=plugins/greeter.so:greeter_greet --plugin-version "greeter=$1.0" --plugin-abi greeter=demo-greeter-1 \
    --plugin shape=plugins/shape.so:shape_create --plugin-version "shape=$1.0" --plugin-abi shape=demo-shape-1
}
plugin_release 1
purl="http://127.0.0.1:$NGINX_PORT/plugrepo/head.json"
"$demo/plugin/plugin_host" "$demo/plugin-data" "$purl" "$pub" | tee "$demo/plugin1.txt"
grep -q "greeter says: Hello from greeter 1" "$demo/plugin1.txt" && grep -q "made a square" "$demo/plugin1.txt"

step "plugins: release 2 changes both plugins; the same host loads the new code"
plugin_release 2
"$demo/plugin/plugin_host" "$demo/plugin-data" "$purl" "$pub" | tee "$demo/plugin2.txt"
grep -q "greeter says: Greetings from greeter 2" "$demo/plugin2.txt" && grep -q "made a circle" "$demo/plugin2.txt"

#!/usr/bin/env bash
# Format compatibility: repositories this tree's CLI publishes (signed, with channels, a staged
# rollout, a halt and its re-raise, key documents, the default expiry, groups) are updated by the
# CLIs of earlier releases, built from git: 0.3.0 reads manifest.json, 0.4.0 head.json.
#   scripts/compat.sh [WORK_DIR]      closes with "N passed, N failed"; builds take minutes
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
work=${1:-$root/build/compat}
mkdir -p "$work"
source "$root/Tests/e2e/expect.sh"
cli="$root/build/prefix/bin/assetpatch"
[[ -x $cli ]] || bash "$root/scripts/build.sh" >/dev/null

declare -A revs=([0.3.0]=f53b72a [0.4.0]=0910ae7)
declare -A urls=([0.3.0]=manifest.json [0.4.0]=head.json)
for v in "${!revs[@]}"; do
  tree="$work/src-$v"
  if [[ ! -x $tree/.build/release/assetpatch-cli ]]; then
    rm -rf "$tree"; mkdir -p "$tree"
    git -C "$root" archive "${revs[$v]}" | tar -C "$tree" -x
    echo "== building the $v CLI (${revs[$v]})"
    (cd "$tree" && swift build -c release --product assetpatch-cli >"$work/build-$v.log" 2>&1) || { cat "$work/build-$v.log"; exit 1; }
  fi
done

served() { "$1" resolve --data-dir "$2" level.txt 2>/dev/null | xargs cat 2>/dev/null; }

repo="$work/repo"; src="$work/assets"
rm -rf "$repo" "$src" "$work"/data-* "$work"/*.key*; mkdir -p "$src"
"$cli" keygen --out "$work/pinned.key" >/dev/null
"$cli" keygen --out "$work/root.key" >/dev/null
"$cli" keygen --out "$work/s1.key" >/dev/null
pub=$(cat "$work/pinned.key.pub")
echo "one" >"$src/level.txt"
expect "publish version 1 (signed, default expiry)" 0 "$cli" publish "$src" --repo "$repo" --package compat --key "$work/pinned.key"
echo "beta two" >"$src/level.txt"
expect "publish version 2 to beta" 0 "$cli" publish "$src" --repo "$repo" --channel beta --key "$work/pinned.key"
for v in "${!revs[@]}"; do
  old="$work/src-$v/.build/release/assetpatch-cli"
  expect "$v: updates to version 1 from ${urls[$v]}" 0 "$old" update --data-dir "$work/data-$v" --url "file://$repo/${urls[$v]}" --public-key "$pub"
  assert "$v: serves version 1" test "$(served "$old" "$work/data-$v")" = "one"
done
echo "three" >"$src/level.txt"
expect "publish version 3 at 0%, then raise it (revisions 2 and 3)" 0 "$cli" publish "$src" --repo "$repo" --rollout 0 --key "$work/pinned.key"
expect "... raised to everyone" 0 "$cli" rollout --repo "$repo" --percent 100 --key "$work/pinned.key"
for v in "${!revs[@]}"; do
  old="$work/src-$v/.build/release/assetpatch-cli"
  expect "$v: updates to version 3" 0 "$old" update --data-dir "$work/data-$v" --url "file://$repo/${urls[$v]}" --public-key "$pub"
  assert "$v: serves version 3" test "$(served "$old" "$work/data-$v")" = "three"
done
expect "key document 1: signing key s1" 0 "$cli" keys create --repo "$repo" --root-key "$work/root.key.pub" --signing-key "$work/s1.key.pub"
"$cli" keys sign "$repo/keys/staged.json" --key "$work/pinned.key" >/dev/null
"$cli" keys sign "$repo/keys/staged.json" --key "$work/root.key" >/dev/null
expect "... published" 0 "$cli" keys publish --repo "$repo" --pinned-key "$work/pinned.key.pub"
echo "four" >"$src/level.txt"
expect "publish version 4 under key document 1" 0 "$cli" publish "$src" --repo "$repo" --key "$work/s1.key"
old="$work/src-0.4.0/.build/release/assetpatch-cli"
expect "0.4.0: follows key document 1 and updates to version 4" 0 "$old" update --data-dir "$work/data-0.4.0" --url "file://$repo/head.json" --public-key "$pub"
assert "0.4.0: serves version 4" test "$(served "$old" "$work/data-0.4.0")" = "four"
# 0.3.0 knows no key documents (as with 0.4's CLI): a client pinning the old key stops at
# version 3; one without keys reads past the new fields.
old="$work/src-0.3.0/.build/release/assetpatch-cli"
expect "0.3.0 without keys updates to version 4 (it ignores revision, signed, keys)" 0 "$old" update --data-dir "$work/data-0.3.0-keyless" --url "file://$repo/manifest.json"
assert "0.3.0: serves version 4" test "$(served "$old" "$work/data-0.3.0-keyless")" = "four"

# Groups (0.5): the group page lies after every page older clients read and the head field
# naming it is one they ignore, so they install every file, the groups' too (a chunked one).
grepo="$work/groups-repo"; gsrc="$work/groups-assets"
rm -rf "$grepo" "$gsrc"; mkdir -p "$gsrc/levels/2"
echo "base" >"$gsrc/base.txt"; echo "level two" >"$gsrc/levels/2/map.txt"
head -c 5000000 /dev/urandom >"$gsrc/levels/2/pack.bin"
expect "publish a release whose levels are an on-demand group" 0 "$cli" publish "$gsrc" --repo "$grepo" --package compat-groups --group 'level2=levels/*'
for v in "${!revs[@]}"; do
  old="$work/src-$v/.build/release/assetpatch-cli"
  expect "$v: updates from ${urls[$v]} of a release with groups" 0 "$old" update --data-dir "$work/data-groups-$v" --url "file://$grepo/${urls[$v]}"
  assert "$v: installs the group's files too" cmp "$("$old" resolve --data-dir "$work/data-groups-$v" levels/2/pack.bin)" "$gsrc/levels/2/pack.bin"
done

# Linked chunks (0.5): files from 64 KiB to the chunk threshold share history; the main tree
# older clients read lists them whole, so they fetch a changed one whole and rebuild nothing.
lrepo="$work/linked-repo"; lsrc="$work/linked-assets"
rm -rf "$lrepo" "$lsrc"; mkdir -p "$lsrc"
seq 1 40000 | sed 's/.*/{"id": &, "name": "item &", "tags": ["a", "b"]},/' >"$lsrc/items.json"
expect "publish a release with a linked 1.4 MB document" 0 "$cli" publish "$lsrc" --repo "$lrepo" --package compat-linked
for v in "${!revs[@]}"; do
  old="$work/src-$v/.build/release/assetpatch-cli"
  expect "$v: installs it from ${urls[$v]}" 0 "$old" update --data-dir "$work/data-linked-$v" --url "file://$lrepo/${urls[$v]}"
done
sed -i 's/"item 20000"/"item twenty thousand"/' "$lsrc/items.json"
expect "publish the document with one line changed" 0 "$cli" publish "$lsrc" --repo "$lrepo"
for v in "${!revs[@]}"; do
  old="$work/src-$v/.build/release/assetpatch-cli"
  expect "$v: updates to it" 0 "$old" update --data-dir "$work/data-linked-$v" --url "file://$lrepo/${urls[$v]}"
  assert "$v: serves the changed document byte for byte" cmp "$("$old" resolve --data-dir "$work/data-linked-$v" items.json)" "$lsrc/items.json"
done

echo "$passed passed, $failed failed"
((failed == 0))

#!/usr/bin/env bash
# A release manager's day with the command-line tool, as docs/release-management.md tells it:
# channels and promotion, staged rollouts and halts, a key rotation whose root keys sign on
# different machines (separate directories here, the staged document copied between them).
#   release_management.sh PATH/TO/assetpatch WORK_DIR       closes with "N passed, N failed"
set -uo pipefail
cli=$1
work=$2
rm -rf "$work"; mkdir -p "$work"
source "$(dirname "$0")/expect.sh"

served() {  # served DATA_DIR: the text the client serves for level.txt ("" for the bundle only)
  local path
  path=$("$cli" resolve --data-dir "$1" level.txt 2>/dev/null) && cat "$path"
}

archive_of() {  # archive_of MANIFEST: the archive sha256 its (envelope's) payload names
  python3 -c "import json,base64,sys;e=json.load(open(sys.argv[1]));print(json.loads(base64.b64decode(e['payload']))['archive']['sha256'])" "$1"
}

repo="$work/repo"
mkdir -p "$work/src" "$work/publisher" "$work/root-a" "$work/root-b"
"$cli" keygen --out "$work/publisher/pinned.key" >/dev/null
pinned=$(cat "$work/publisher/pinned.key.pub")
trust=(--public-key "$pinned")

# --- channels ------------------------------------------------------------------------------
echo "stable 1" >"$work/src/level.txt"
expect "publish version 1 to stable" 0 "$cli" publish "$work/src" --repo "$repo" --package game --key "$work/publisher/pinned.key"
echo "beta 2" >"$work/src/level.txt"
expect "publish version 2 to beta" 0 "$cli" publish "$work/src" --repo "$repo" --channel beta --key "$work/publisher/pinned.key"
assert "beta lives in channels/beta" test -f "$repo/channels/beta/head.json"
expect "verify beta with the pinned key" 0 "$cli" verify "$repo" --channel beta --public-key "$pinned"
expect "a beta tester updates from beta" 0 "$cli" update --data-dir "$work/tester" --url "file://$repo/channels/beta/head.json" "${trust[@]}"
assert "the tester serves beta 2" test "$(served "$work/tester")" = "beta 2"
expect "leaving beta by URL alone is refused (the channel is pinned)" 3 "$cli" update --data-dir "$work/tester" --url "file://$repo/head.json" "${trust[@]}"
assert "... and says why" grep -q 'this client follows channel "beta"' "$work/err"
assert "... still serving beta 2" test "$(served "$work/tester")" = "beta 2"
expect "naming the channel moves down" 0 "$cli" update --data-dir "$work/tester" --url "file://$repo/head.json" --channel stable "${trust[@]}"
assert "the tester serves stable 1" test "$(served "$work/tester")" = "stable 1"
expect "promote beta to stable" 0 "$cli" promote --repo "$repo" --from beta --to stable --key "$work/publisher/pinned.key"
assert "stable offers beta's archive" test "$(archive_of "$repo/manifest.json")" = "$(archive_of "$repo/channels/beta/manifest.json")"
expect "promoting the same version again is refused" 3 "$cli" promote --repo "$repo" --from beta --to stable --key "$work/publisher/pinned.key"
expect "the stable client takes the promoted release" 0 "$cli" update --data-dir "$work/tester" --url "file://$repo/head.json" --channel stable "${trust[@]}"
assert "... served from the kept copy, no download" grep -q "kept on disk\|updated to version 2" "$work/out"
assert "the tester serves beta 2 again" test "$(served "$work/tester")" = "beta 2"

# --- staged rollout ------------------------------------------------------------------------
echo "stable 3" >"$work/src/level.txt"
expect "publish version 3 to 10% of clients" 0 "$cli" publish "$work/src" --repo "$repo" --rollout 10 --rollout-schedule 1d=50,3d=100 --key "$work/publisher/pinned.key"
expect "inspect shows the rollout" 0 "$cli" inspect "$repo"
assert "... share and schedule" grep -q "rollout:  10%, 50% from .*, 100% from .*; now 10%" "$work/out"
inside=0; outside=0
for i in $(seq 1 40); do
  "$cli" update --data-dir "$work/fleet/$i" --url "file://$repo/head.json" --rollout-id "client-$i" "${trust[@]}" >"$work/out" 2>&1
  want=$(python3 -c "import hashlib;print(int(int.from_bytes(hashlib.sha256(b'game/3/client-$i').digest()[:8],'big')%10000 < 1000))")
  got=$(test "$(served "$work/fleet/$i")" = "stable 3" && echo 1 || echo 0)
  if [[ $want == "$got" ]]; then inside=$((inside + got)); outside=$((outside + 1 - got)); else inside=-1000; fi
done
assert "40 clients: exactly those the formula picks took version 3 ($inside in, $outside out)" test $inside -ge 0
expect "halt the rollout" 0 "$cli" rollout --repo "$repo" --halt --key "$work/publisher/pinned.key"
expect "a new client gets nothing while halted (exit 4)" 4 "$cli" update --data-dir "$work/late" --url "file://$repo/head.json" --rollout-id client-x "${trust[@]}"
assert "... and is told it is halted" grep -q "is halted" "$work/out"
expect "status of a client shows its rollout id" 0 "$cli" status --data-dir "$work/fleet/1"
assert "... client-1 is not written (ids given by option are the host's)" bash -c "! grep -q client-1 '$work/out'"
expect "release to everyone" 0 "$cli" rollout --repo "$repo" --percent 100 --key "$work/publisher/pinned.key"
expect "the late client takes version 3" 0 "$cli" update --data-dir "$work/late" --url "file://$repo/head.json" --rollout-id client-x "${trust[@]}"
assert "... and serves it" test "$(served "$work/late")" = "stable 3"

# --- key rotation: two root holders on their own machines ----------------------------------
"$cli" keygen --out "$work/root-a/root.key" >/dev/null
"$cli" keygen --out "$work/root-b/root.key" >/dev/null
"$cli" keygen --out "$work/publisher/signing-1.key" >/dev/null
"$cli" keygen --out "$work/publisher/signing-2.key" >/dev/null
expect "stage key document 1 (2-of-2 root, 1 signing key)" 0 "$cli" keys create --repo "$repo" \
  --root-key "$work/root-a/root.key.pub" --root-key "$work/root-b/root.key.pub" --root-threshold 2 \
  --signing-key "$work/publisher/signing-1.key.pub" --expires 30d
expect "a private key file is refused as a public key" 3 "$cli" keys create --repo "$repo" --root-key "$work/root-a/root.key" \
  --signing-key "$work/publisher/signing-1.key.pub" --out "$work/never.json"
cp "$repo/keys/staged.json" "$work/root-a/doc.json"
expect "root holder A signs on A's machine" 0 "$cli" keys sign "$work/root-a/doc.json" --key "$work/root-a/root.key"
expect "publishing with one of two root signatures is refused" 3 "$cli" keys publish --repo "$repo" "$work/root-a/doc.json" --pinned-key "$pinned"
cp "$work/root-a/doc.json" "$work/root-b/doc.json"
expect "root holder B signs on B's machine" 0 "$cli" keys sign "$work/root-b/doc.json" --key "$work/root-b/root.key"
expect "document 1 needs the pinned key's signature too" 3 "$cli" keys publish --repo "$repo" "$work/root-b/doc.json" --pinned-key "$pinned"
expect "the publisher signs with the pinned key" 0 "$cli" keys sign "$work/root-b/doc.json" --key "$work/publisher/pinned.key" --repo "$repo"
expect "publish key document 1" 0 "$cli" keys publish --repo "$repo" "$work/root-b/doc.json" --pinned-key "$pinned"
expect "re-sign every channel with the new signing key" 0 "$cli" resign --repo "$repo" --key "$work/publisher/signing-1.key"
expect "the old key alone no longer publishes" 3 "$cli" publish "$work/src" --repo "$repo" --key "$work/publisher/pinned.key"
echo "stable 4" >"$work/src/level.txt"
expect "publish version 4 with signing key 1" 0 "$cli" publish "$work/src" --repo "$repo" --key "$work/publisher/signing-1.key"
expect "a client pinning the old key follows the chain" 0 "$cli" update --data-dir "$work/late" --url "file://$repo/head.json" "${trust[@]}"
assert "... and serves version 4" test "$(served "$work/late")" = "stable 4"
expect "verify follows the chain from the pinned key" 0 "$cli" verify "$repo" --public-key "$pinned"
# Rotate signing key 1 out.
expect "stage document 2" 0 "$cli" keys create --repo "$repo" --root-key "$work/root-a/root.key.pub" \
  --root-key "$work/root-b/root.key.pub" --root-threshold 2 --signing-key "$work/publisher/signing-2.key.pub"
expect "A signs document 2" 0 "$cli" keys sign "$repo/keys/staged.json" --key "$work/root-a/root.key"
expect "B signs document 2" 0 "$cli" keys sign "$repo/keys/staged.json" --key "$work/root-b/root.key"
expect "publish document 2" 0 "$cli" keys publish --repo "$repo"
expect "keys show checks the chain" 0 "$cli" keys show --repo "$repo"
assert "... two documents" test "$(grep -c '^version ' "$work/out")" = 2
cp -r "$repo" "$work/stolen"
expect "re-sign with signing key 2" 0 "$cli" resign --repo "$repo" --key "$work/publisher/signing-2.key"
expect "the client learns document 2 (and is current: exit 2)" 2 "$cli" update --data-dir "$work/late" --url "file://$repo/head.json" "${trust[@]}"
# Someone holding the rotated-out key signs a release in a copy without document 2.
rm "$work/stolen/keys/2.json"
echo "evil" >"$work/src/level.txt"
expect "the thief publishes with signing key 1" 0 "$cli" publish "$work/src" --repo "$work/stolen" --version 9 --key "$work/publisher/signing-1.key"
expect "a client that saw document 2 refuses it" 3 "$cli" update --data-dir "$work/late" --url "file://$work/stolen/head.json" "${trust[@]}"
assert "... with a signature error" grep -q "ASSETPATCH_ERR_SIGNATURE" "$work/err"
assert "... and keeps serving version 4" test "$(served "$work/late")" = "stable 4"

echo "$passed passed, $failed failed"
((failed == 0))

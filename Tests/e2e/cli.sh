#!/usr/bin/env bash
# The command-line tool's contract (README, docs/format.md): exit statuses, publish rules, verify, status.
#   cli.sh PATH/TO/assetpatch WORK_DIR       closes with "N passed, N failed"
set -uo pipefail
cli=$1
work=$2
rm -rf "$work"; mkdir -p "$work"
source "$(dirname "$0")/expect.sh"

mkdir -p "$work/src/sub" "$work/bundle"
printf 'hello\n' >"$work/src/hello.txt"
head -c 200000 /dev/urandom >"$work/src/sub/noise.bin"
seq 1 50000 >"$work/src/sub/numbers.txt"
printf 'hello\n' >"$work/bundle/hello.txt"
repo="$work/repo"
url="file://$repo/manifest.json"

expect "usage error exits 1" 1 "$cli" publish
expect "unknown subcommand exits 1" 1 "$cli" frobnicate
expect "publish v1" 0 "$cli" publish "$work/src" --repo "$repo" --package demo --label one
assert "archive passes unzip -t" unzip -tq "$repo"/archives/*.zip
assert "incompressible entry is stored" bash -c "unzip -v '$repo'/archives/*.zip | grep 'sub/noise.bin' | grep -q Stored"
assert "text entry is deflated" bash -c "unzip -v '$repo'/archives/*.zip | grep 'sub/numbers.txt' | grep -q Defl"
assert "archive is named by its sha256" bash -c "cd '$repo/archives' && for f in *.zip; do [[ \$(sha256sum \$f | cut -c1-64).zip == \$f ]] || exit 1; done"
expect "publish refuses a version not above the current" 3 "$cli" publish "$work/src" --repo "$repo" --version 1
assert "refusal names the versions" grep -q "not above" "$work/err"
# Entries are compressed on every core; the archive's bytes don't depend on how many.
for jobs in 1 3; do
  expect "publish --jobs $jobs" 0 "$cli" publish "$work/src" --repo "$work/jobs$jobs" --package demo --version 1 --jobs "$jobs"
done
assert "--jobs 1 and --jobs 3 write the same archive" bash -c "cmp '$work'/jobs1/archives/*.zip '$work'/jobs3/archives/*.zip"
expect "publish refuses --jobs 0" 3 "$cli" publish "$work/src" --repo "$work/jobs0" --jobs 0
expect "verify a good repository" 0 "$cli" verify "$repo"
expect "inspect --json" 0 "$cli" inspect "$repo" --json
assert "inspect --json prints the manifest" python3 -c "import json,sys; m=json.load(open('$work/out')); sys.exit(m['version']!=1 or m['package']!='demo')"
assert "files are in byte order and each zip location is the entry's (Python's zipfile agrees)" python3 - "$work/out" "$repo" <<'PY'
import json, os, sys, zipfile
m = json.load(open(sys.argv[1]))
paths = [f["path"] for f in m["files"]]
# The release index comes last, listed for clients before 0.4 (docs/format.md).
assert paths[-1] == ".assetpatch/index", paths
assert paths[:-1] == sorted(paths[:-1], key=lambda p: p.encode()), paths
with zipfile.ZipFile(os.path.join(sys.argv[2], m["archive"]["url"])) as z:
    for f in m["files"]:
        info, loc = z.getinfo(f["path"]), f["zip"]
        assert loc["header_offset"] == info.header_offset, f
        assert loc["data_offset"] == info.header_offset + 30 + len(info.filename.encode()) + len(info.extra), f
        assert (loc["compressed_size"], loc["method"]) == (info.compress_size, info.compress_type), f
PY
expect "check finds version 1" 0 "$cli" check --data-dir "$work/data" --url "$url"
expect "update installs it" 0 "$cli" update --data-dir "$work/data" --bundle-dir "$work/bundle" --url "$url"
assert "update without a terminal prints one line per phase" bash -c "grep -q '^download' '$work/err' && grep -q '^install' '$work/err'"
expect "check exits 2 when there is nothing new" 2 "$cli" check --data-dir "$work/data" --url "$url"
expect "update with nothing new exits 2 (current)" 2 "$cli" update --data-dir "$work/data" --url "$url"
expect "resolve prints paths" 0 "$cli" resolve --data-dir "$work/data" --bundle-dir "$work/bundle" hello.txt sub/noise.bin
assert "resolved file is the published one" cmp -s "$(sed -n 2p "$work/out")" "$work/src/sub/noise.bin"
expect "resolve of a missing name exits 3" 3 "$cli" resolve --data-dir "$work/data" nothing.txt
assert "failure names the status" grep -q ASSETPATCH_ERR_NOT_FOUND "$work/err"
expect "status --json" 0 "$cli" status --data-dir "$work/data" --json
assert "status reports version 1" python3 -c "import json,sys; s=json.load(open('$work/out')); sys.exit(s['active']!=1 or s['pending'] is not None or s['data_bytes']<=0)"

# Differential updates: status --url and inspect --data-dir show what an update would fetch,
# without changing the data directory; check counts the same bytes; the update fetches them.
cp -r "$work/src" "$work/dsrc"
expect "publish d1" 0 "$cli" publish "$work/dsrc" --repo "$work/drepo"
expect "update to d1" 0 "$cli" update --data-dir "$work/ddata" --url "file://$work/drepo/manifest.json"
seq 2 50001 >"$work/dsrc/sub/numbers.txt"
printf 'added\n' >"$work/dsrc/added.txt"
expect "publish d2" 0 "$cli" publish "$work/dsrc" --repo "$work/drepo"
cp "$work/ddata/state.json" "$work/state.before"
expect "status --url --json" 0 "$cli" status --data-dir "$work/ddata" --url "file://$work/drepo/manifest.json" --json
assert "status shows the differential fetch" python3 -c "import json,sys; n=json.load(open('$work/out'))['next']; sys.exit(n['method']!='differential' or sorted(n['fetch'])!=['added.txt','sub/numbers.txt'] or n['linked_files']!=2 or not 0<n['transfer_bytes']<n['archive_bytes'])"
python3 -c "import json; print(json.load(open('$work/out'))['next']['transfer_bytes'])" >"$work/planned"
expect "inspect --data-dir" 0 "$cli" inspect "$work/drepo" --data-dir "$work/ddata"
assert "inspect shows the same fetch" bash -c "grep -q '^fetch:    differential, 2 files' '$work/out' && grep -q '^ranges:   every file' '$work/out'"
assert "status and inspect changed nothing" cmp -s "$work/ddata/state.json" "$work/state.before"
expect "check" 0 "$cli" check --data-dir "$work/ddata" --url "file://$work/drepo/manifest.json"
assert "check counts the planned bytes" grep -q " $(cat "$work/planned") bytes to download" "$work/out"
expect "differential update" 0 "$cli" update --data-dir "$work/ddata" --url "file://$work/drepo/manifest.json"
# Entries fetched: added.txt, and numbers.txt as a delta against d1's (its two edits), both.
assert "download phase moved the planned bytes" bash -c "grep -qE '^download .* 2/2 files' '$work/err'"
expect "resolve after the differential update" 0 "$cli" resolve --data-dir "$work/ddata" sub/numbers.txt sub/noise.bin added.txt
assert "changed file is the new one" cmp -s "$(sed -n 1p "$work/out")" "$work/dsrc/sub/numbers.txt"
assert "unchanged file shares its inode with the kept release" bash -c "[[ \$(stat -c %h '$(sed -n 2p "$work/out")') -ge 2 ]]"
expect "status after" 0 "$cli" status --data-dir "$work/ddata" --json
assert "linked files count once in data_bytes" python3 -c "
import json, os, sys
s = json.load(open('$work/out'))
every = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk('$work/ddata/releases') for n in ns)
sys.exit(not s['data_bytes'] < every - 200000 + 16384)"  # the rest: records, state, index pages

# The lifecycle from the command line: rollback, mark-good, reset; the tool's opens count no launch.
expect "rollback from d2" 0 "$cli" rollback --data-dir "$work/ddata"
assert "rollback names the version now served" grep -q "rolled back to version 1" "$work/out"
expect "status after the rollback" 0 "$cli" status --data-dir "$work/ddata" --json
assert "status shows the bad version, the rollback and no launch counted" python3 -c "import json,sys; s=json.load(open('$work/out')); sys.exit(s['active']!=1 or s['bad']!=[2] or s['last_rollback']['from']!=2 or s['launches']!=0)"
expect "update skips the bad version (exit 6)" 6 "$cli" update --data-dir "$work/ddata" --url "file://$work/drepo/manifest.json"
assert "still version 1: the bad version is skipped" grep -q "no update: the manifest offers version 2, which was rolled back from" "$work/out"
expect "mark-good" 0 "$cli" mark-good --data-dir "$work/ddata"
expect "rollback to the bundle" 0 "$cli" rollback --data-dir "$work/ddata"
expect "rollback with nothing left is a state error" 3 "$cli" rollback --data-dir "$work/ddata"
assert "the failure names ERR_STATE" grep -q ASSETPATCH_ERR_STATE "$work/err"
expect "reset" 0 "$cli" reset --data-dir "$work/ddata"
assert "reset removed every release" bash -c "[[ -z \$(ls '$work/ddata/releases') ]]"
expect "update after reset installs the newest" 0 "$cli" update --data-dir "$work/ddata" --url "file://$work/drepo/manifest.json"
assert "version 2 again" grep -q "updated to version 2" "$work/out"

# --base leaves out files identical to the shipped bundle.
printf 'changed\n' >"$work/src/hello2.txt"
expect "publish v2 with --base" 0 "$cli" publish "$work/src" --repo "$repo" --base "$work/src"
expect "inspect v2" 0 "$cli" inspect "$repo" --json
assert "--base left out every identical file" python3 -c "import json,sys; m=json.load(open('$work/out')); sys.exit(m['version']!=2 or [f['path'] for f in m['files']]!=['.assetpatch/index'])"

# verify catches a damaged archive.
cp -r "$repo" "$work/damaged"
expect "publish v3" 0 "$cli" publish "$work/src" --repo "$work/damaged"
zip=$(ls "$work"/damaged/archives/*.zip | xargs ls -t | head -1)
python3 - "$work/damaged" <<'PY'
import json, sys, os
repo = sys.argv[1]
m = json.load(open(os.path.join(repo, "manifest.json")))
path = os.path.join(repo, m["archive"]["url"])
data = bytearray(open(path, "rb").read())
data[40] ^= 0xFF
open(path, "wb").write(data)
PY
expect "verify refuses a damaged archive" 3 "$cli" verify "$work/damaged"
assert "verify names the integrity failure" grep -q ASSETPATCH_ERR_INTEGRITY "$work/err"

# Signed publishing (keygen + DSSE) and key checks.
expect "keygen" 0 "$cli" keygen --out "$work/key"
assert "private key is 0600" bash -c "[[ \$(stat -c %a '$work/key') == 600 ]]"
pub=$(cat "$work/key.pub")
expect "publish signed" 0 "$cli" publish "$work/src" --repo "$work/signed" --key "$work/key"
expect "verify with the right key" 0 "$cli" verify "$work/signed" --public-key-file "$work/key.pub"
expect "keygen other" 0 "$cli" keygen --out "$work/other"
expect "verify with the wrong key fails" 3 "$cli" verify "$work/signed" --public-key "$(cat "$work/other.pub")"
assert "wrong key is a signature error" grep -q ASSETPATCH_ERR_SIGNATURE "$work/err"
expect "update with the right key" 0 "$cli" update --data-dir "$work/sdata" --url "file://$work/signed/manifest.json" --public-key "$pub"
expect "unsigned manifest refused when keys are set" 3 "$cli" update --data-dir "$work/sdata2" --url "$url" --public-key "$pub"

echo "$passed passed, $failed failed"
((failed == 0))

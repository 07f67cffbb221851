#!/usr/bin/env bash
# The Cloud Storage flow end to end, as production runs it, on the emulator
# and the local Cloud Storage server that `make demo-gcs` started
# (FIRESTORE_EMULATOR_HOST and STORAGE_EMULATOR_HOST are set, bucket
# "demo" exists): generate the application's 132-district snapshot folder,
# upload it as the application's uploader does — one object at a time
# through the JSON API's upload endpoint, manifest.json last — show that
# a folder whose upload has not finished is not written (exit 7), finish
# the upload, write it from gs://, read it back, check it against the
# folder, and rerun it as a backfill that finds nothing to do.
# Any unexpected exit code stops the demo with a FAIL line.
set -euo pipefail
bin=${BIN:-bin/snapwriter}
date=${DEMO_DATE:-2026-11-20}
bucket=${DEMO_BUCKET:-demo}
export GOOGLE_CLOUD_PROJECT=${GOOGLE_CLOUD_PROJECT:-snapwriter-demo-gcs}
: "${FIRESTORE_EMULATOR_HOST:?not set: run this through make demo-gcs}"
: "${STORAGE_EMULATOR_HOST:?not set: run this through make demo-gcs}"
# curl is the uploader here (any HTTP client would do); Debian's base
# images lack it.
if ! command -v curl >/dev/null 2>&1; then
  echo "demo-gcs: FAIL: curl is not installed (Debian: apt-get install curl); it uploads the folder" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
folder=$work/$date
prefix=snapshots/$date
url=gs://$bucket/$prefix/

fail() { echo "demo-gcs: FAIL: $*" >&2; exit 1; }

# expect CODE CMD...: run CMD, and stop the demo unless it exits CODE.
expect() {
  local want=$1 got=0
  shift
  "$@" || got=$?
  [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want"
}

# upload FILE NAME: store FILE as the object NAME of the bucket, as the
# application's uploader does (a media upload; each upload of a name makes
# a new generation of it).
upload() {
  curl -sS -f -X POST -H 'Content-Type: application/json' --data-binary "@$1" \
    "$STORAGE_EMULATOR_HOST/upload/storage/v1/b/$bucket/o?uploadType=media&name=$2" >/dev/null \
    || fail "uploading $1 as gs://$bucket/$2"
}

echo "== generate --folder: the application's snapshot folder, 132 districts for $date"
"$bin" generate --date "$date" --districts 132 --seed 42 --folder "$folder"
echo "   $(find "$folder" -mindepth 1 -maxdepth 1 | wc -l) files, $(du -sb "$folder" | cut -f1) bytes"

echo "== upload to $url with curl: every file but the manifest, then a manifest without writeComplete (an upload under way)"
for f in "$folder"/*.json; do
  name=$(basename "$f")
  [ "$name" = manifest.json ] || upload "$f" "$prefix/$name"
done
python3 - "$folder/manifest.json" "$work/manifest-unfinished.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
del m["writeComplete"]
json.dump(m, open(sys.argv[2], "w"))
PY
upload "$work/manifest-unfinished.json" "$prefix/manifest.json"

echo "== write --input $url while the upload is not finished: exit 7, nothing written"
expect 7 "$bin" write --input "$url" --log-level warn
expect 0 "$bin" list >"$work/list.txt"
if grep -q "$date" "$work/list.txt"; then fail "list shows $date after a write refused as not ready"; fi
echo "   list: no snapshot of $date"

echo "== the uploader finishes: manifest.json with writeComplete: true, last"
upload "$folder/manifest.json" "$prefix/manifest.json"

echo "== write --input $url (logs on stderr, result on stdout)"
expect 0 "$bin" write --input "$url" --json --log-format console >"$work/result.json"
python3 - "$work/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("   result: complete=%s batches=%d/%d districts=%d fence=%s in %d ms" % (
    r["complete"], r["successfulBatches"], r["totalBatches"], r["districtsWritten"], r["fence"], r["totalDurationMs"]))
PY

echo "== get: read it back"
expect 0 "$bin" get --date "$date" >"$work/out.json"
python3 -c 'import json,sys; print("   %d districts read back" % len(json.load(open(sys.argv[1]))["payload"]["districts"]))' "$work/out.json"

echo "== verify --input: the stored snapshot against the local folder"
expect 0 "$bin" verify --date "$date" --input "$folder"

echo "== backfill --input-dir gs://$bucket/snapshots --skip-complete: the date is complete, nothing to write"
expect 0 "$bin" backfill --input-dir "gs://$bucket/snapshots" --from "$date" --to "$date" --skip-complete --log-level warn

echo "== list"
expect 0 "$bin" list
echo "demo-gcs: OK"

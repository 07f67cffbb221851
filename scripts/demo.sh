#!/usr/bin/env bash
# The job end to end on the emulator that `make demo` started
# (FIRESTORE_EMULATOR_HOST is set): generate a realistic 132-district
# snapshot, write it, read it back, and check the two are the same; then
# print how to go on by hand, since the demo's emulator stops with it.
set -euo pipefail
bin=${BIN:-bin/snapwriter}
date=${DEMO_DATE:-2026-11-20}
export GOOGLE_CLOUD_PROJECT=${GOOGLE_CLOUD_PROJECT:-snapwriter-demo}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== on the emulator at $FIRESTORE_EMULATOR_HOST, project $GOOGLE_CLOUD_PROJECT"
echo "== generate: 132 districts for $date"
"$bin" generate --date "$date" --districts 132 --seed 42 > "$work/in.json"
echo "   $(wc -c < "$work/in.json") bytes of input"

echo "== write (logs on stderr, result on stdout)"
"$bin" write --input "$work/in.json" --json --log-format console > "$work/result.json"
python3 - "$work/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("   result: complete=%s batches=%d/%d districts=%d fence=%s in %d ms" % (
    r["complete"], r["successfulBatches"], r["totalBatches"], r["districtsWritten"], r["fence"], r["totalDurationMs"]))
for b in r["batchResults"]:
    print("     batch %d: %2d ops, success=%s, retries=%d, %d ms" % (
        b["batchIndex"], b["operationCount"], b["success"], b["retryAttempts"], b["durationMs"]))
PY

echo "== get: read it back"
"$bin" get --date "$date" > "$work/out.json"

echo "== list"
"$bin" list

echo "== compare input and read-back"
python3 - "$work/in.json" "$work/out.json" <<'PY' || { echo "demo: read-back differs from input"; exit 1; }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
if a != b:
    sys.exit(1)
print("   identical: %d districts" % len(a["payload"]["districts"]))
PY

# The demo's emulator stops when this script ends: say how to get one that
# stays, and where the binary is, so the README's tour can follow.
port=${EMULATOR_PORT:-8686}
start="make emulator"
[ "$port" = 8686 ] || start="make emulator EMULATOR_PORT=$port"
cat <<EOT

demo: done; its emulator stops now, and its data with it. To go on by hand
(README.md, "Using it"), start an emulator that keeps running, in another terminal:

  $start            # 127.0.0.1:$port until Ctrl-C; EMULATOR_PORT=N for another port

then, here:

  export FIRESTORE_EMULATOR_HOST=127.0.0.1:$port GOOGLE_CLOUD_PROJECT=$GOOGLE_CLOUD_PROJECT
  export PATH="$PWD/bin:\$PATH"   # the CLI is $bin (or: go install ./cmd/snapwriter)
  snapwriter generate --date $date --districts 132 | snapwriter write --input -
  snapwriter list

and on with the README's tour.
EOT

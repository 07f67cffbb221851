#!/usr/bin/env bash
# Apply firestore.indexes.json to a Firestore database with gcloud: one
# `gcloud firestore indexes fields update` per field override (exemptions
# with --disable-indexes) and one `gcloud firestore indexes composite create`
# per composite index (an index that exists already is left as it is).
# See docs/indexes.md for what is exempted and why.
#
#   deploy/indexes.sh --project PROJECT_ID [--database '(default)']
#                     [--collection snapshots] [--config firestore.indexes.json]
#                     [--print]
#
# --collection: the root collection snapwriter writes to (its --collection);
#   the configuration's "snapshots" collection group is renamed to it.
# --print: print the commands, one a line, and run nothing.
# The alternative with the Firebase CLI, for the default collection name:
#   firebase deploy --only firestore:indexes --project PROJECT_ID
# Needs python3 (to read the JSON) and, unless --print, gcloud authenticated
# with rights to manage indexes (roles/datastore.indexAdmin).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec python3 - "$here/../firestore.indexes.json" "$@" <<'PY'
import argparse, json, os, shlex, signal, subprocess, sys

# Printing into `head` and the like: end quietly when the reader does.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

DEFAULT_GROUP = "snapshots"  # snapwriter's default root collection

default_config, argv = sys.argv[1], sys.argv[2:]
ap = argparse.ArgumentParser(prog="deploy/indexes.sh")
ap.add_argument("--project", default=None, help="Google Cloud project (default: $PROJECT_ID)")
ap.add_argument("--database", default="(default)")
ap.add_argument("--collection", default=DEFAULT_GROUP, help="root collection of the snapshots")
ap.add_argument("--config", default=default_config)
ap.add_argument("--print", action="store_true", help="print the commands, run nothing")
args = ap.parse_args(argv)

project = args.project or os.environ.get("PROJECT_ID")
if not project:
    if not args.print:
        ap.error("--project (or $PROJECT_ID) is required")
    project = "PROJECT_ID"

with open(args.config) as f:
    config = json.load(f)

def group(g):
    return args.collection if g == DEFAULT_GROUP else g

common = ["--database=" + args.database, "--project=" + project]
fields, composites = [], []
for o in config.get("fieldOverrides", []):
    cmd = ["gcloud", "firestore", "indexes", "fields", "update", o["fieldPath"],
           "--collection-group=" + group(o["collectionGroup"])]
    if not o["indexes"]:
        cmd.append("--disable-indexes")
    for ix in o["indexes"]:
        kv = []
        if "order" in ix:
            kv.append("order=" + ix["order"])
        if "arrayConfig" in ix:
            kv.append("array-config=" + ix["arrayConfig"])
        # A single-field index is collection-scoped unless it says so.
        if ix.get("queryScope", "COLLECTION") != "COLLECTION":
            kv.append("query-scope=" + ix["queryScope"])
        cmd.append("--index=" + ",".join(kv))
    fields.append(cmd + common)
for ix in config.get("indexes", []):
    cmd = ["gcloud", "firestore", "indexes", "composite", "create",
           "--collection-group=" + group(ix["collectionGroup"]),
           "--query-scope=" + ix.get("queryScope", "COLLECTION").lower().replace("_", "-")]
    for fl in ix["fields"]:
        kv = ["field-path=" + fl["fieldPath"]]
        if "order" in fl:
            kv.append("order=" + fl["order"].lower())
        if "arrayConfig" in fl:
            kv.append("array-config=" + fl["arrayConfig"].lower())
        cmd.append("--field-config=" + ",".join(kv))
    composites.append(cmd + common)

if args.print:
    for cmd in fields + composites:
        print(shlex.join(cmd))
    sys.exit(0)

for cmd in fields:
    print("+", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)
for cmd in composites:
    print("+", shlex.join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        # Creating an index that exists fails; that is the state we want.
        if "ALREADY_EXISTS" in r.stderr or "already exists" in r.stderr:
            print("  (the index exists already)", flush=True)
            continue
        sys.stderr.write(r.stderr)
        sys.exit(r.returncode)
PY

#!/usr/bin/env bash
# From an empty Google Cloud project to the daily snapwriter job, alerting.
# Run it from anywhere; `--help` prints the text below. Each step asks
# gcloud whether its resource exists (describe, list, get-iam-policy) before
# it creates it, so a second run changes nothing that exists: it prints
# "unchanged" for each such step. Only the jobs (`gcloud run jobs replace`),
# the trigger (`gcloud scheduler jobs update`) and the index overrides
# (deploy/indexes.sh) are applied again on every run: applying the same
# definition twice leaves the same thing.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: deploy/bootstrap.sh --project PROJECT_ID --region REGION --bucket BUCKET [flags]

From an empty Google Cloud project to a scheduled, alerting daily snapwriter job:
enables the APIs, creates the Artifact Registry repository, the Firestore
database (native mode, in --region), the service accounts and their roles,
builds the image with Cloud Build (deploy/cloudbuild.yaml), applies the index
exemptions (deploy/indexes.sh), replaces both Cloud Run jobs (deploy/job.yaml,
deploy/daily-job.yaml), creates or updates the Cloud Scheduler trigger, and
creates the alert policies and the dashboard. Every step checks before it
creates; run it again at will.

Required:
  --project ID            the Google Cloud project
  --region REGION         Cloud Run, Artifact Registry, Cloud Scheduler and the
                          Firestore database's location (e.g. europe-west3)
  --bucket NAME           the bucket holding snapshots/YYYY-MM-DD/ (no gs://)
Optional:
  --repo NAME             Artifact Registry repository (default: snapwriter)
  --tag TAG               image tag (default: git's short HEAD)
  --database ID           Firestore database (default: (default))
  --schedule CRON         the trigger's schedule (default: "0 6 * * *")
  --time-zone TZ          the trigger's time zone, also the daily job's
                          --timezone, so "today" is the trigger's day
                          (default: Europe/Berlin)
  --notification-channel projects/P/notificationChannels/ID
                          where the alert policies notify (default: none;
                          attach one later in the console)
  --dry-run               print every command it would run; run none, change
                          nothing, need no credentials (it assumes an empty
                          project)
  --help                  this text
Exit codes: 0 done, 1 a command failed, 2 usage error (nothing run).

The deployer (you, gcloud's account) needs these roles on the project unless
said otherwise; each is the narrowest predefined role holding the step's
permissions:
  roles/serviceusage.serviceUsageAdmin   list and enable the APIs
  roles/artifactregistry.admin           create the repository (repoAdmin cannot)
  roles/datastore.owner                  create the database, manage its indexes
  roles/iam.serviceAccountCreator and roles/iam.serviceAccountViewer
                                         create and describe the service accounts
                                         (or roles/iam.serviceAccountAdmin)
  roles/resourcemanager.projectIamAdmin  grant the job's project roles
  roles/storage.admin on the bucket only grant roles/storage.objectViewer on it
                                         (storage.buckets.setIamPolicy)
  roles/cloudbuild.builds.editor         submit the build; gcloud uploads the
                                         source to gs://PROJECT_cloudbuild, which
                                         needs write access there (the first
                                         build creates it: storage.buckets.create)
  roles/run.admin                        replace the jobs and grant run.invoker
                                         on the daily job (run.developer cannot)
  roles/iam.serviceAccountUser on the two service accounts below only
                                         run the jobs as snapwriter@, and let
                                         the trigger mint snapwriter-scheduler@'s
                                         token
  roles/cloudscheduler.admin             create and update the trigger
  roles/monitoring.alertPolicyEditor and roles/monitoring.dashboardEditor
                                         the alert policies and the dashboard
                                         (or roles/monitoring.editor)
Cloud Build itself runs as the project's build service account, which needs
roles/artifactregistry.writer on the repository; this script does not change it.

What it grants:
  snapwriter@PROJECT.iam.gserviceaccount.com (runs both jobs):
    roles/datastore.user on the project, roles/storage.objectViewer on the bucket,
    roles/monitoring.metricWriter and roles/cloudtrace.agent (the collector sidecar)
  snapwriter-scheduler@PROJECT.iam.gserviceaccount.com (the trigger):
    roles/run.invoker on the job snapwriter-daily only
EOF
}

# The daily job's default time zone: deploy/daily-job.yaml ships with the
# same --timezone (a test checks that they agree).
default_time_zone=Europe/Berlin

project="" region="" bucket="" repo=snapwriter tag="" database="(default)"
schedule="0 6 * * *" time_zone=$default_time_zone channel="" dry_run=false

die_usage() {
  echo "deploy/bootstrap.sh: $*" >&2
  echo "Run deploy/bootstrap.sh --help for the flags." >&2
  exit 2
}

while [ $# -gt 0 ]; do
  arg=$1
  shift
  case $arg in
    --help | -h) usage; exit 0 ;;
    --dry-run) dry_run=true; continue ;;
    --*=*) name=${arg%%=*} value=${arg#*=} ;;
    --*)
      name=$arg
      [ $# -gt 0 ] || die_usage "$name needs a value"
      value=$1
      shift
      ;;
    *) die_usage "unexpected argument: $arg" ;;
  esac
  case $name in
    --project) project=$value ;;
    --region) region=$value ;;
    --bucket) bucket=$value ;;
    --repo) repo=$value ;;
    --tag) tag=$value ;;
    --database) database=$value ;;
    --schedule) schedule=$value ;;
    --time-zone) time_zone=$value ;;
    --notification-channel) channel=$value ;;
    *) die_usage "unknown flag: $name" ;;
  esac
done

missing=()
[ -n "$project" ] || missing+=(--project)
[ -n "$region" ] || missing+=(--region)
[ -n "$bucket" ] || missing+=(--bucket)
if [ ${#missing[@]} -gt 0 ]; then
  usage >&2
  die_usage "missing required flag(s): ${missing[*]}"
fi

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
if [ -z "$tag" ]; then
  tag=$(git -C "$root" rev-parse --short HEAD 2>/dev/null) || die_usage "--tag is required outside a git checkout"
fi
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo "$tag")

# The values go into resource names and, through sed, into the job YAML:
# refuse anything that is not plainly one of them before running anything.
check() { # flag value regexp what
  [[ $2 =~ $3 ]] || die_usage "$1 $2: want $4"
}
check --project "$project" '^[a-z][a-z0-9-]{4,28}[a-z0-9]$' "a project id (6-30 lowercase letters, digits, hyphens)"
check --region "$region" '^[a-z]+-[a-z]+[0-9]+$' "a Google Cloud region such as europe-west3"
[[ $bucket != gs://* ]] || die_usage "--bucket $bucket: want the bucket's name, without gs://"
check --bucket "$bucket" '^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$' "a bucket name"
check --repo "$repo" '^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$' "an Artifact Registry repository id"
check --tag "$tag" '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$' "a Docker tag"
check --database "$database" '^(\(default\)|[a-z][a-z0-9-]{2,61}[a-z0-9])$' "(default) or a database id"
check --schedule "$schedule" '^[^[:space:]]+([[:space:]]+[^[:space:]]+){4}$' "a five-field cron expression"
check --time-zone "$time_zone" '^(UTC|[A-Z][A-Za-z_]+(/[A-Za-z0-9_+-]+){1,2})$' "an IANA time zone such as Europe/Berlin"
if [ -d /usr/share/zoneinfo ] && [ ! -f "/usr/share/zoneinfo/$time_zone" ]; then
  die_usage "--time-zone $time_zone: not a time zone this machine knows (/usr/share/zoneinfo)"
fi
if [ -n "$channel" ]; then
  check --notification-channel "$channel" '^projects/[^/]+/notificationChannels/[0-9]+$' "projects/PROJECT/notificationChannels/ID"
fi

job_sa="snapwriter@${project}.iam.gserviceaccount.com"
scheduler_sa="snapwriter-scheduler@${project}.iam.gserviceaccount.com"
image="${region}-docker.pkg.dev/${project}/${repo}/snapwriter:${tag}"
apis=(run.googleapis.com cloudbuild.googleapis.com artifactregistry.googleapis.com
  cloudscheduler.googleapis.com firestore.googleapis.com storage.googleapis.com
  iam.googleapis.com cloudresourcemanager.googleapis.com monitoring.googleapis.com
  cloudtrace.googleapis.com logging.googleapis.com)

summary=()
# In a dry run nothing is created: the state says what a run would do.
note() {
  local state=$2
  [ "$dry_run" != true ] || [ "$state" != created ] || state="would be created"
  summary+=("$(printf '%-52s %s' "$1" "$state")")
  echo "== $1: $state"
}

# show prints a command as a shell would read it.
show() { printf '+'; printf ' %q' "$@"; printf '\n'; }
# run runs a command that changes something (nothing in a dry run).
run() {
  show "$@"
  [ "$dry_run" = true ] || "$@"
}
# ask runs a read-only command and prints its stdout; in a dry run it only
# shows it and answers nothing, as an empty project would. Its failure
# (NOT_FOUND) is an answer, not an error: the caller decides.
ask() {
  show "$@" >&2
  [ "$dry_run" = false ] || return 1
  "$@" 2>/dev/null
}

# has_binding reports whether the policy printed by a get-iam-policy command
# binds role to member (one row per member; not every get-iam-policy
# command takes --filter, so the rows are searched here).
has_binding() { # role member get-iam-policy-command...
  local role=$1 member=$2 got
  shift 2
  got=$(ask "$@" --flatten=bindings[].members --format='csv[no-heading](bindings.role,bindings.members)') || return 1
  grep -qxF "${role},${member}" <<<"$got"
}

# grant binds role to member on a project, bucket or job, after asking
# whether the binding exists.
grant() { # what role member project|bucket|job
  local what=$1 role=$2 member=$3 get add
  case $4 in
    project)
      get=(gcloud projects get-iam-policy "$project")
      add=(gcloud projects add-iam-policy-binding "$project" --condition=None) ;;
    bucket)
      get=(gcloud storage buckets get-iam-policy "gs://${bucket}" --project="$project")
      add=(gcloud storage buckets add-iam-policy-binding "gs://${bucket}" --project="$project") ;;
    job)
      get=(gcloud run jobs get-iam-policy snapwriter-daily --region="$region" --project="$project")
      add=(gcloud run jobs add-iam-policy-binding snapwriter-daily --region="$region" --project="$project") ;;
  esac
  if has_binding "$role" "$member" "${get[@]}"; then
    note "$what" unchanged
  else
    run "${add[@]}" --member="$member" --role="$role"
    note "$what" created
  fi
}

echo "bootstrap: project ${project}, region ${region}, bucket gs://${bucket}, image ${image}$([ "$dry_run" = true ] && echo ' (dry run: nothing is run)')"

# 1. APIs: one list, then one enable for those missing.
enabled=$(ask gcloud services list --enabled --project="$project" --format='value(config.name)') || enabled=""
need=()
for api in "${apis[@]}"; do
  if grep -qxF "$api" <<<"$enabled"; then note "api $api" unchanged; else need+=("$api"); fi
done
if [ ${#need[@]} -gt 0 ]; then
  run gcloud services enable "${need[@]}" --project="$project"
  for api in "${need[@]}"; do note "api $api" created; done
fi

# 2. The Artifact Registry repository the image goes to.
if ask gcloud artifacts repositories describe "$repo" --location="$region" --project="$project" >/dev/null; then
  note "artifact registry repository $repo" unchanged
else
  run gcloud artifacts repositories create "$repo" --repository-format=docker --location="$region" \
    --description="snapwriter images" --project="$project"
  note "artifact registry repository $repo" created
fi

# 3. The Firestore database, native mode. An existing database in Datastore
#    mode cannot be converted: stop rather than write snapshots into it.
if db_type=$(ask gcloud firestore databases describe --database="$database" --project="$project" --format='value(type)'); then
  if [ "$db_type" != FIRESTORE_NATIVE ]; then
    echo "deploy/bootstrap.sh: database $database exists in ${db_type:-an unknown} mode; snapwriter needs Firestore in native mode" >&2
    exit 1
  fi
  note "firestore database $database" unchanged
else
  run gcloud firestore databases create --database="$database" --location="$region" --type=firestore-native \
    --project="$project"
  note "firestore database $database" created
fi

# 4. Service accounts: the jobs run as one, the trigger as the other.
for sa in snapwriter snapwriter-scheduler; do
  if ask gcloud iam service-accounts describe "${sa}@${project}.iam.gserviceaccount.com" --project="$project" >/dev/null; then
    note "service account $sa" unchanged
  else
    run gcloud iam service-accounts create "$sa" --display-name="$sa (deploy/bootstrap.sh)" --project="$project"
    note "service account $sa" created
  fi
done

# 5. The job's roles: Firestore, the collector sidecar's export, the bucket.
for role in roles/datastore.user roles/monitoring.metricWriter roles/cloudtrace.agent; do
  grant "snapwriter: $role" "$role" "serviceAccount:${job_sa}" project
done
grant "snapwriter: roles/storage.objectViewer on gs://$bucket" roles/storage.objectViewer "serviceAccount:${job_sa}" bucket

# 6. The image, unless this tag is built already. Cloud Build uploads no
#    .git, so the revision comes in as a substitution (deploy/cloudbuild.yaml).
if ask gcloud artifacts docker images describe "$image" --project="$project" >/dev/null; then
  note "image snapwriter:$tag" unchanged
else
  if [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
    echo "bootstrap: note: the working tree has changes; they are built into snapwriter:$tag" >&2
  fi
  run gcloud builds submit "$root" --config="$root/deploy/cloudbuild.yaml" \
    --substitutions="_IMAGE=${image},_REVISION=${revision}" --project="$project"
  note "image snapwriter:$tag" created
fi

# 7. Index exemptions (docs/indexes.md): the same overrides again change
#    nothing, and an existing composite index is left as it is.
if [ "$dry_run" = true ]; then
  bash "$here/indexes.sh" --print --project "$project" --database "$database" | sed 's/^/+ /'
else
  bash "$here/indexes.sh" --project "$project" --database "$database"
fi
note "firestore index overrides" "applied (idempotent)"

# 8. Both jobs, from their YAML with the placeholders filled in and the
#    daily job's --timezone set to the trigger's.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for file in job daily-job; do
  sed -e "s/PROJECT_ID/${project}/g" -e "s/REGION/${region}/g" -e "s/REPO/${repo}/g" \
    -e "s/:TAG\$/:${tag}/" -e "s/BUCKET/${bucket}/g" \
    -e "s|\"--timezone\", \"[^\"]*\"|\"--timezone\", \"${time_zone}\"|" \
    "$here/${file}.yaml" >"$tmp/${file}.yaml"
  name=$(sed -n 's/^  name: //p' "$tmp/${file}.yaml" | head -1)
  if ask gcloud run jobs describe "$name" --region="$region" --project="$project" --format='value(metadata.name)' >/dev/null; then
    state="replaced (idempotent)"
  else
    state=created
  fi
  run gcloud run jobs replace "$tmp/${file}.yaml" --region="$region" --project="$project"
  note "cloud run job $name" "$state"
done

# 9. The scheduler may start the daily job and nothing else.
grant "snapwriter-scheduler: roles/run.invoker on snapwriter-daily" roles/run.invoker "serviceAccount:${scheduler_sa}" job

# 10. The trigger: Cloud Scheduler calls the Cloud Run Admin API's jobs.run
#     with an OAuth token of the scheduler's service account.
uri="https://run.googleapis.com/v2/projects/${project}/locations/${region}/jobs/snapwriter-daily:run"
trigger=(--schedule="$schedule" --time-zone="$time_zone" --uri="$uri" --http-method=POST
  --oauth-service-account-email="$scheduler_sa"
  --oauth-token-scope=https://www.googleapis.com/auth/cloud-platform --project="$project")
if ask gcloud scheduler jobs describe snapwriter-daily --location="$region" --project="$project" >/dev/null; then
  run gcloud scheduler jobs update http snapwriter-daily --location="$region" "${trigger[@]}"
  note "cloud scheduler trigger snapwriter-daily" "updated (idempotent)"
else
  run gcloud scheduler jobs create http snapwriter-daily --location="$region" "${trigger[@]}"
  note "cloud scheduler trigger snapwriter-daily" created
fi

# 11. Alert policies and the dashboard, found by display name. Alert
#     policies are only in gcloud's alpha track.
display_name() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["displayName"])' "$1"; }
for policy in gate-alert alert-failed-execution alert-partial-write; do
  file="$here/${policy}.json"
  dn=$(display_name "$file")
  got=$(ask gcloud alpha monitoring policies list --project="$project" \
    --filter="displayName=\"${dn}\"" --format='value(name)') || got=""
  if [ -n "$got" ]; then
    note "alert policy $policy" unchanged
  else
    run gcloud alpha monitoring policies create --policy-from-file="$file" \
      ${channel:+--notification-channels="$channel"} --project="$project"
    note "alert policy $policy" created
  fi
done
dn=$(display_name "$here/dashboard.json")
got=$(ask gcloud monitoring dashboards list --project="$project" \
  --filter="displayName=\"${dn}\"" --format='value(name)') || got=""
if [ -n "$got" ]; then
  note "dashboard" unchanged
else
  run gcloud monitoring dashboards create --config-from-file="$here/dashboard.json" --project="$project"
  note "dashboard" created
fi

echo
echo "bootstrap: summary$([ "$dry_run" = true ] && echo ' (dry run: what a run on an empty project would do)')"
printf '  %s\n' "${summary[@]}"
echo "Next, the check: gcloud run jobs execute snapwriter-daily --region ${region} --project ${project} --container snapwriter --args doctor --wait"

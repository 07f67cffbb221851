#!/usr/bin/env bash
# Deploy snapwriter as Cloud Run jobs and trigger the daily one from Cloud
# Scheduler. Read it, set the variables, run it step by step or whole; every
# step can be re-run. Needs gcloud, authenticated, with rights to grant IAM.
set -euo pipefail

PROJECT_ID=${PROJECT_ID:?set PROJECT_ID}
REGION=${REGION:-europe-west3}
REPO=${REPO:-snapwriter}                      # Artifact Registry repository
TAG=${TAG:-$(git rev-parse --short HEAD)}
BUCKET=${BUCKET:?set BUCKET}                  # holds snapshots/YYYY-MM-DD/ (or snapshots/YYYY-MM-DD.json)
SCHEDULE=${SCHEDULE:-"0 6 * * *"}             # daily at 06:00 ...
TIME_ZONE=${TIME_ZONE:-Europe/Berlin}         # ... Berlin time
JOB_SA="snapwriter@${PROJECT_ID}.iam.gserviceaccount.com"
SCHEDULER_SA="snapwriter-scheduler@${PROJECT_ID}.iam.gserviceaccount.com"
IMAGE="${REGION}-docker.pkg.dev/${PROJECT_ID}/${REPO}/snapwriter:${TAG}"

# 1. Image (Cloud Build, no local Docker needed). Cloud Build uploads no .git,
#    so the revision `snapwriter version` reports is passed as a build argument.
gcloud builds submit --project "$PROJECT_ID" --config deploy/cloudbuild.yaml \
  --substitutions "_IMAGE=${IMAGE},_REVISION=$(git rev-parse HEAD)" .

# 2. Service accounts and their rights: the job reads and writes Firestore and
#    reads the bucket; the scheduler may start the job and nothing else.
gcloud iam service-accounts create snapwriter --project "$PROJECT_ID" 2>/dev/null || true
gcloud iam service-accounts create snapwriter-scheduler --project "$PROJECT_ID" 2>/dev/null || true
gcloud projects add-iam-policy-binding "$PROJECT_ID" \
  --member "serviceAccount:${JOB_SA}" --role roles/datastore.user --condition None
gcloud storage buckets add-iam-policy-binding "gs://${BUCKET}" \
  --member "serviceAccount:${JOB_SA}" --role roles/storage.objectViewer

# 3. The jobs, from the YAML with the placeholders filled in.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for job in job daily-job; do
  sed -e "s/PROJECT_ID/${PROJECT_ID}/g" -e "s/REGION/${REGION}/g" -e "s/REPO/${REPO}/g" \
      -e "s/TAG/${TAG}/g" -e "s/BUCKET/${BUCKET}/g" "deploy/${job}.yaml" >"${tmp}/${job}.yaml"
  gcloud run jobs replace "${tmp}/${job}.yaml" --project "$PROJECT_ID" --region "$REGION"
done
gcloud run jobs add-iam-policy-binding snapwriter-daily --project "$PROJECT_ID" --region "$REGION" \
  --member "serviceAccount:${SCHEDULER_SA}" --role roles/run.invoker

# 4. The daily trigger: Cloud Scheduler calls the Cloud Run Admin API's
#    jobs.run with an OAuth token of the scheduler's service account.
uri="https://run.googleapis.com/v2/projects/${PROJECT_ID}/locations/${REGION}/jobs/snapwriter-daily:run"
if gcloud scheduler jobs describe snapwriter-daily --project "$PROJECT_ID" --location "$REGION" >/dev/null 2>&1; then
  verb=update
else
  verb=create
fi
gcloud scheduler jobs "$verb" http snapwriter-daily --project "$PROJECT_ID" --location "$REGION" \
  --schedule "$SCHEDULE" --time-zone "$TIME_ZONE" \
  --uri "$uri" --http-method POST \
  --oauth-service-account-email "$SCHEDULER_SA" \
  --oauth-token-scope https://www.googleapis.com/auth/cloud-platform

# 5. A backfill, when needed (4 tasks share the dates):
#    gcloud run jobs execute snapwriter-backfill --project "$PROJECT_ID" --region "$REGION" --wait
echo "deployed ${IMAGE}; daily trigger: ${SCHEDULE} ${TIME_ZONE}"

# syntax=docker/dockerfile:1
# snapwriter as a Cloud Run job: a static binary on distroless, non-root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The revision (and version) `snapwriter version` shows when the context has
# no .git — `gcloud builds submit` uploads none: deploy/cloudbuild.yaml passes
# --build-arg REVISION=… . A build with .git embeds its own, which wins.
# Declared here, after the module download, so that a new revision reuses
# that layer.
ARG REVISION=""
ARG VERSION=""
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
    -ldflags "-s -w -X github.com/snapwriter/snapwriter/internal/buildinfo.revision=${REVISION} -X github.com/snapwriter/snapwriter/internal/buildinfo.version=${VERSION}" \
    -o /out/snapwriter ./cmd/snapwriter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/snapwriter /usr/local/bin/snapwriter
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/snapwriter"]
CMD ["--help"]

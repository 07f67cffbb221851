# syntax=docker/dockerfile:1
# snapwriter as a Cloud Run job: a static binary on distroless, non-root.
#
# The image is for the platform asked for — `docker buildx build --platform
# linux/amd64 …`, Cloud Run's — whatever the builder's own: Go
# cross-compiles on the builder's platform (no emulation), and the final
# stage is the target's. Without --platform the image is for the builder's
# platform, which on an ARM laptop is linux/arm64: Cloud Run will not run it.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
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
# Set by BuildKit from --platform (the builder's own platform by default).
ARG TARGETOS
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
    -ldflags "-s -w -X github.com/snapwriter/snapwriter/internal/buildinfo.revision=${REVISION} -X github.com/snapwriter/snapwriter/internal/buildinfo.version=${VERSION}" \
    -o /out/snapwriter ./cmd/snapwriter

FROM gcr.io/distroless/static-debian12:nonroot
# OCI annotations (`docker inspect`, registries' UIs): what the image is, where
# its source and documentation are, its licence, and the revision and
# version it was built from (the build arguments above; empty when not given).
ARG REVISION=""
ARG VERSION=""
LABEL org.opencontainers.image.title="snapwriter" \
      org.opencontainers.image.description="Writes daily district-statistics snapshots into Google Cloud Firestore under a fenced lock" \
      org.opencontainers.image.source="https://github.com/snapwriter/snapwriter" \
      org.opencontainers.image.documentation="https://github.com/snapwriter/snapwriter/blob/main/docs/deployment.md" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/snapwriter /usr/local/bin/snapwriter
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/snapwriter"]
CMD ["--help"]

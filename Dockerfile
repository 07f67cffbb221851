# syntax=docker/dockerfile:1
# snapwriter as a Cloud Run job: a static binary on distroless, non-root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o /out/snapwriter ./cmd/snapwriter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/snapwriter /usr/local/bin/snapwriter
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/snapwriter"]
CMD ["--help"]

# snapwriter — see README.md. Every target that needs Firestore starts its own
# emulator (gcloud's Cloud Firestore emulator, Java 17+) and stops it after
# (`make emulator` keeps one running for you);
# every target that needs PostgreSQL a throwaway cluster (initdb + pg_ctl from
# the machine's PostgreSQL packages, data in a temp dir, deleted after).
GO          ?= go
BIN         := bin/snapwriter
# The emulator keeps every document version it was ever sent in its heap,
# resets or not, and a full heap stops it for seconds (withemulator says so
# at its end when its JVM paused for a second or more): the suites' writes
# need more than the JVM's default quarter of RAM, and it takes only what
# it uses.
WITH_EMU    := JAVA_TOOL_OPTIONS=-XX:MaxRAMPercentage=75 $(GO) run ./emulator/withemulator --
WITH_PG     := $(GO) run ./pgserver/withpostgres --
WITH_PG_DUR := $(GO) run ./pgserver/withpostgres --durable --
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# What `snapwriter version` shows when a build has no VCS information of
# its own (a copy without .git): the linker sets it (internal/buildinfo).
# REVISION is git's HEAD when git is there; VERSION is empty unless given
# (make build VERSION=v1.4.0). The build's own VCS information wins.
REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION     ?=
BUILDINFO   := github.com/snapwriter/snapwriter/internal/buildinfo
LDFLAGS     := -s -w -X $(BUILDINFO).revision=$(REVISION) -X $(BUILDINFO).version=$(VERSION)
# Builds main packages into bin/ (static, -trimpath, LDFLAGS) with one
# `go build`, showing progress: the binaries a target needs are built
# together, so the packages they share compile once — a `go run` of a
# helper after `make build` would compile them all again, its flags
# differing.
GOBUILD     := GO="$(GO)" LDFLAGS="$(LDFLAGS)" bash scripts/build.sh
# `make emulator`'s address and the project id it suggests; any project id
# works on the emulator.
EMULATOR_PORT ?= 8686
DEMO_PROJECT  ?= snapwriter-demo

.PHONY: all build test test-short demo demo-gcs emulator bench chaos lint deps-check docs fmt tidy clean

all: lint test

build:
	@echo "build: $(BIN) (a few minutes the first time: Go compiles the Firestore client and gRPC)"
	@$(GOBUILD) ./cmd/snapwriter

# All tests, with the race detector, against one fresh emulator and one fresh
# PostgreSQL cluster; then the count of walks over a district's values
# (snapshot/walkcount_test.go), which needs the walkcount build tag to
# count at all.
test:
	$(WITH_EMU) $(WITH_PG) $(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -tags walkcount -count=1 -run '^TestWalksPerDistrict$$' ./snapshot/

# The fast tier for the edit-test loop (docs/development.md, "The fast
# tier"): every test that needs no server, without -race. It starts no
# server — no emulator, no PostgreSQL, no built binary: in -short mode the
# harnesses start none and every test that would reach one skips itself,
# and so do a few slow ones; `make test` runs them all.
test-short:
	$(GO) test -short -count=1 -timeout 10m ./...

# End to end on the local emulator: generate 132 districts, write, read back,
# compare; then how to go on by hand. bin/snapwriter and bin/withemulator are
# built by one go build, and nothing is compiled after it.
demo:
	@echo "demo: building bin/snapwriter and bin/withemulator — the first time, a few minutes: Go compiles the Firestore client and gRPC"
	@$(GOBUILD) ./cmd/snapwriter ./emulator/withemulator
	@echo "demo: starting a Firestore emulator for the demo (a JVM: a few seconds); it stops when the demo ends"
	@EMULATOR_PORT=$(EMULATOR_PORT) GOOGLE_CLOUD_PROJECT=$(DEMO_PROJECT) bin/withemulator -- bash scripts/demo.sh

# A Firestore emulator that keeps running, in the foreground, on
# 127.0.0.1:$(EMULATOR_PORT), until Ctrl-C; it prints the export lines for
# another shell (the emulator's address, a project id, bin/ on PATH). Its
# data is in memory: gone when it stops.
emulator:
	@echo "emulator: building bin/withemulator (a few minutes the first time, seconds after make demo)"
	@$(GOBUILD) ./emulator/withemulator
	@echo "emulator: starting the Firestore emulator on 127.0.0.1:$(EMULATOR_PORT) (another port: make emulator EMULATOR_PORT=N)"
	@bin/withemulator --port $(EMULATOR_PORT) --serve GOOGLE_CLOUD_PROJECT=$(DEMO_PROJECT) 'PATH="$(CURDIR)/bin:$$PATH"'

# The Cloud Storage flow on the emulator and a local Cloud Storage server
# (gcsserver/withgcs, bucket "demo"): generate the application's
# 132-district folder, upload it with curl as the uploader does (manifest
# last; first unfinished: exit 7), write it from gs://, get, verify against
# the folder, a backfill --skip-complete that does nothing. Needs curl.
demo-gcs:
	@echo "demo-gcs: building bin/snapwriter, bin/withemulator and bin/withgcs — the first time, a few minutes"
	@$(GOBUILD) ./cmd/snapwriter ./emulator/withemulator ./gcsserver/withgcs
	@echo "demo-gcs: starting a Firestore emulator and a Cloud Storage server for the demo"
	@bin/withemulator -- bin/withgcs --bucket demo -- bash scripts/demo-gcs.sh

# Benchmarks (figures in docs/benchmarks.md): snapshot writes at 0, 2 and 10 ms round
# trip (a delay proxy between client and emulator) against BulkWriter,
# unfenced commits and the seed design, with the client's CPU per 1,000
# districts, root commits and root bytes written per snapshot, and the built
# binary's peak RSS, printed as one table at the end;
# lock acquire+release against the spec's literal transactions (PostgreSQL on
# a durable cluster: fsync and synchronous_commit on). Knobs: BENCH_ROUNDS,
# BENCH_RTTS (ms, "0,2,10"), BENCH_DISTRICTS ("132,5000"),
# BENCH_RSS_DISTRICTS ("5000,20000" or "none"), BENCH_EMU_DOCS (documents
# an emulator takes before the snapshot benchmark restarts it),
# BENCH_GCS_DISTRICTS ("5000" or "none": peak RSS of a per-district folder
# written from disk and from gs://, a table of its own),
# BENCH_TRAFFIC_DISTRICTS ("5000" or "none": the write budget against
# internal/fsproxy enforcing Firestore's 500/50/5 ramp — one write, four
# tasks sharing it, and its cost on the emulator alone; a table of its own).
# The emulator keeps every version it ever stored in its heap, resets or not
# (~0.5 GB per 5,000-district write): it gets 75% of RAM (WITH_EMU).
bench:
	$(WITH_EMU) $(WITH_PG_DUR) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./snapshot/ ./locking/...

# The chaos suite (chaos/, build tag chaos): the built binary against a real
# emulator and PostgreSQL through a fault-injecting proxy (SIGKILL/SIGSTOP
# mid-write, black holes, latency, connection resets, a PostgreSQL crash,
# unreachable stores; a gs:// input lost, killed or replaced mid-read),
# each checked as an operator would: exit codes, get ==
# input, the manifest against the documents, no lock left. Prints the fault
# matrix (docs/operations.md). About 5-7 minutes.
chaos:
	$(WITH_EMU) $(WITH_PG) $(GO) test -tags chaos -count=1 -timeout 30m -v ./chaos/

lint:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go mod tidy would change go.mod/go.sum"; exit 1; }

# Modules in go.mod with a newer version on the module proxy (scripts/deps-check.sh).
# Informational: exits 0 however many are behind; non-zero only if it cannot list them.
deps-check:
	@GO=$(GO) bash scripts/deps-check.sh

# The documentation generated from the command tree and the table of
# endings: docs/cli/ (Markdown, a page a command), docs/man/ (man pages),
# and the exit-code tables in README.md and docs/cli.md. -short: it needs
# no server. Without -update the same test fails on a stale file.
docs:
	$(GO) test -short -count=1 ./cmd/snapwriter -run TestGeneratedDocs -update

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin

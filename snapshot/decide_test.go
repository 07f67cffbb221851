package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/cenkalti/backoff/v4"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/pacing"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// The decisions a write makes between its reads and its commits — how its
// districts are cut into chunks, what a chunk of unknown commit outcome
// turns out to have written, what the manifest records and how the Result
// counts it — are tested here without a server: on a Writer whose client
// never dials (offlineWriter), fed what a transaction would have read.

// offlineWriter is a Writer configured with opts, as NewWriter configures
// one, on a client that never connects: it builds document names, and any
// call to Firestore would fail.
func offlineWriter(t *testing.T, opts ...Option) *Writer {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///offline.invalid", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	client, err := firestore.NewClient(context.Background(), "offline", option.WithGRPCConn(conn), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	w, err := configure(client, "firestore", opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// offlineRun is a job with the values its stages hand on: the Result so
// far and the written set.
type offlineRun struct {
	*job
	res     *Result
	written *written
}

// offlineJob is a write's job on w of n generated districts, its input
// built as a write builds it under the lock, its Result started by a root
// transaction that committed (batch 0).
func offlineJob(t *testing.T, w *Writer, n int) *offlineRun {
	t.Helper()
	j := w.newJob(context.Background(), opWrite, day)
	in, err := inputPath(w, model.Generate(day, n, 1))
	if err != nil {
		t.Fatal(err)
	}
	j.in = in
	return &offlineRun{job: j,
		res: &Result{SnapshotID: day, Fence: in.Fence, FailedDistricts: []string{},
			BatchResults: []BatchResult{{BatchIndex: 0, OperationCount: 1, Success: true, DistrictIDs: []string{}}}},
		written: newWritten()}
}

// opIDs are the district ids of ops, in order.
func opIDs(ops []op) []string {
	ids := make([]string, len(ops))
	for i, o := range ops {
		ids[i] = o.districtID
	}
	return ids
}

// A write's operations are its districts' sets in input order (only those
// a repair selects), then the deletes of the stale documents; its chunks
// cut them in that order, at most the batch size each — less when the
// write budget's share is small — and at most maxCommitBytes.
func TestChunksOfAWrite(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t)
	j := offlineJob(t, w, 132)
	ids := layout.DistrictIDs(j.in.Snap)

	ops := j.in.ops(nil)
	if got := opIDs(ops); !slices.Equal(got, ids) {
		t.Fatalf("ops(nil) = %v, want every district in input order %v", got, ids)
	}
	for _, o := range ops {
		if o.district == nil || o.bytes != j.in.OpBytes[o.districtID] || o.bytes <= 0 {
			t.Fatalf("op %s: district %v, bytes %d, want a set of %d bytes", o.districtID, o.district, o.bytes, j.in.OpBytes[o.districtID])
		}
	}
	want := map[string]bool{ids[100]: true, ids[5]: true, "not-an-input-district": true}
	if got := opIDs(j.in.ops(want)); !slices.Equal(got, []string{ids[5], ids[100]}) {
		t.Errorf("ops of %v = %v, want the input's districts among them, in input order", want, got)
	}

	all := withDeletes(ops, []string{"gone-1", "gone-2"})
	for _, o := range all[len(ops):] {
		if o.district != nil || o.bytes != deleteBytes {
			t.Errorf("stale %s: district %v, bytes %d, want a delete of %d bytes", o.districtID, o.district, o.bytes, deleteBytes)
		}
	}
	chunks, err := w.chunks(all)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var joined []op
	for _, c := range chunks {
		sizes = append(sizes, len(c))
		joined = append(joined, c...)
	}
	if !slices.Equal(sizes, []int{50, 50, 34}) || !slices.Equal(opIDs(joined), append(slices.Clone(ids), "gone-1", "gone-2")) {
		t.Errorf("chunks of 132 sets and 2 deletes: sizes %v, order %v; want 50, 50, 34, in order, the deletes last", sizes, opIDs(joined))
	}

	// Four tasks sharing the 500/s ramp commit a tenth of a second of a
	// quarter of it at once.
	budget, err := pacing.New(pacing.DefaultRamp(), 4)
	if err != nil {
		t.Fatal(err)
	}
	shared := offlineWriter(t, WithWriteBudget(budget))
	if got := shared.chunkOps(); got != 12 {
		t.Errorf("chunkOps with a quarter of the ramp = %d, want 12", got)
	}
	if chunks, err := shared.chunks(ops); err != nil || len(chunks) != 11 || len(chunks[10]) != 12 {
		t.Errorf("chunks of 132 with a quarter of the ramp: %d (%v), want 11 of 12", len(chunks), err)
	}

	// Bytes bound a chunk before the batch size does.
	big := []op{{districtID: "a", bytes: maxCommitBytes / 2}, {districtID: "b", bytes: maxCommitBytes / 2}, {districtID: "c", bytes: 1}}
	if chunks, err := w.chunks(big); err != nil || len(chunks) != 2 || len(chunks[0]) != 2 {
		t.Errorf("chunks of two half-limit ops and one more: %v (%v), want [a b] [c]", chunks, err)
	}
	if _, err := w.chunks([]op{{districtID: "huge", bytes: maxCommitBytes + 1}}); err == nil {
		t.Error("an op larger than a commit was given a chunk")
	}
}

// A chunk's writes are a set of each district's document, under this
// writer's fence, and a delete of each stale one, in the chunk's order.
func TestChunkWrites(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t)
	j := offlineJob(t, w, 3)
	ops := withDeletes(j.in.ops(nil), []string{"gone"})
	districts := j.names.Districts
	writes, err := chunk{index: 1, ops: ops, names: j.names, in: &j.in}.writes()
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != 4 {
		t.Fatalf("%d writes, want 4", len(writes))
	}
	for i, o := range ops {
		name := districts.Doc(layout.DistrictDocID(o.districtID)).Path
		if o.district == nil {
			if writes[i].GetDelete() != name {
				t.Errorf("write %d: %v, want the delete of %s", i, writes[i], name)
			}
			continue
		}
		doc := asRead(t, writes[i])
		if doc.GetName() != name || fenceOf(layout.FieldsOf(doc)) != j.in.Fence {
			t.Errorf("write %d: document %s under fence %q, want %s under %q", i, doc.GetName(), fenceOf(layout.FieldsOf(doc)), name, j.in.Fence)
		}
	}
}

// asRead is the document write w sets as a read returns it: its wire
// form decoded, as the store would decode it.
func asRead(t *testing.T, w *pb.Write) *pb.Document {
	t.Helper()
	b, err := proto.Marshal(w.GetUpdate())
	if err != nil {
		t.Fatal(err)
	}
	var doc pb.Document
	if err := proto.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return &doc
}

// districtRead is district id's document as a transaction would read it,
// written under fence.
func districtRead(t *testing.T, j *offlineRun, id, fence string) *pb.Document {
	t.Helper()
	in := j.in
	in.Fence = fence
	ops := j.in.ops(map[string]bool{id: true})
	if len(ops) != 1 {
		t.Fatalf("no district %s", id)
	}
	doc, err := in.document(ops[0])
	if err != nil {
		t.Fatal(err)
	}
	set, err := layout.WireSetWrite(j.names.DistrictName(id), doc)
	if err != nil {
		t.Fatal(err)
	}
	return asRead(t, set)
}

// fenceRead is the snapshot's fence document as a transaction would read
// it, written under fence by a writer of backend.
func fenceRead(t *testing.T, j *offlineRun, fence, backend string) *pb.Document {
	t.Helper()
	in := j.in
	in.Fence, in.Backend = fence, backend
	set, err := layout.SetWrite(j.names.Fence.Path, in.FenceDoc(time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	return asRead(t, set)
}

// chunkOf is the result of a chunk of ops before its commit, as
// writeChunk starts it: its districts are those it sets; its deletes are
// counted.
func chunkOf(index int, ops []op) BatchResult {
	r := BatchResult{BatchIndex: index, OperationCount: len(ops), DistrictIDs: []string{}, ops: ops}
	for _, o := range ops {
		if o.district != nil {
			r.DistrictIDs = append(r.DistrictIDs, o.districtID)
		} else {
			r.deletes++
		}
	}
	return r
}

// unsureChunk is the result of a chunk of ops whose commit outcome is
// unknown.
func unsureChunk(index int, ops []op) BatchResult {
	r := chunkOf(index, ops)
	r.Err, r.unsure = errors.New("connection reset"), true
	return r
}

// A chunk whose commit outcome is unknown is decided from its documents as
// the finish reads them: written when each set document carries this
// writer's fence and each deleted one is gone. The job's own Result and
// written set stay as they were: the finish's transaction may run again.
func TestResolveDecidesUnknownOutcomes(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t)
	j := offlineJob(t, w, 6)
	ids := layout.DistrictIDs(j.in.Snap)
	ops := j.in.ops(nil)
	committed := BatchResult{BatchIndex: 1, OperationCount: 2, Success: true, CommittedAt: time.Now(), DistrictIDs: ids[:2], ops: ops[:2]}
	landed := unsureChunk(2, withDeletes(slices.Clone(ops[2:4]), []string{"gone"}))
	lost := unsureChunk(3, ops[4:6])
	for _, b := range []BatchResult{committed, landed, lost} {
		j.res.BatchResults = append(j.res.BatchResults, b)
		j.written.add(b)
	}
	if !anyUnsure(j.res) {
		t.Fatal("anyUnsure: false with two chunks of unknown outcome")
	}
	districts := j.names.Districts
	wantDocs := []string{districts.Doc(layout.DistrictDocID(ids[2])).Path, districts.Doc(layout.DistrictDocID(ids[3])).Path,
		districts.Doc(layout.DistrictDocID("gone")).Path, districts.Doc(layout.DistrictDocID(ids[4])).Path, districts.Doc(layout.DistrictDocID(ids[5])).Path}
	if got := j.unsureDocs(j.res); !slices.Equal(got, wantDocs) {
		t.Errorf("unsureDocs = %v, want %v", got, wantDocs)
	}
	// Chunk 2 landed (its sets under our fence, its stale document gone);
	// of chunk 3, one district is under an older writer's fence and one is
	// missing.
	found := map[string]*pb.Document{
		wantDocs[0]: districtRead(t, j, ids[2], j.in.Fence),
		wantDocs[1]: districtRead(t, j, ids[3], j.in.Fence),
		wantDocs[3]: districtRead(t, j, ids[4], "000000000000000"),
	}
	r, set := j.resolve(found, j.res, j.written)

	if b := r.BatchResults[2]; !b.Success || b.Err != nil || b.unsure {
		t.Errorf("chunk 2: success %v, err %v, unsure %v; want written", b.Success, b.Err, b.unsure)
	}
	if b := r.BatchResults[3]; b.Success || b.unsure || b.Err == nil || b.Err.Error() != "not written (connection reset)" {
		t.Errorf("chunk 3: success %v, err %v, unsure %v; want not written (connection reset)", b.Success, b.Err, b.unsure)
	}
	if r.DistrictsWritten != 4 || !slices.Equal(r.FailedDistricts, ids[4:6]) || r.FailedChunks != 1 || r.SuccessfulChunks != 2 {
		t.Errorf("tally: %d written, failed %v, chunks %d ok %d failed; want 4, %v, 2 ok 1 failed",
			r.DistrictsWritten, r.FailedDistricts, r.SuccessfulChunks, r.FailedChunks, ids[4:6])
	}
	if !set.decided || !set.ends[ids[2]].ok || set.ends[ids[4]].ok || set.ends[ids[5]].open || set.ends[ids[4]].msg != "not written (connection reset)" {
		t.Errorf("decided set: %+v", set.ends)
	}
	if !j.res.BatchResults[2].unsure || !j.res.BatchResults[3].unsure || j.written.decided || !j.written.ends[ids[2]].open {
		t.Error("resolve changed the job's own Result or written set")
	}

	// Nothing unsure: the job's written set as it is, tallied.
	k := offlineJob(t, w, 2)
	done := BatchResult{BatchIndex: 1, OperationCount: 2, Success: true, CommittedAt: time.Now(), DistrictIDs: layout.DistrictIDs(k.in.Snap), deletes: 1}
	k.res.BatchResults = append(k.res.BatchResults, done)
	k.written.add(done)
	if r, set := k.resolve(nil, k.res, k.written); set != k.written || r.DistrictsWritten != 2 || r.StaleDeleted != 1 || r.TotalBatches != 2 {
		t.Errorf("resolve with nothing unsure: set %p (job's %p), %d written, %d stale deleted, %d batches", set, k.written, r.DistrictsWritten, r.StaleDeleted, r.TotalBatches)
	}
}

// What the finish records: complete when every district is written,
// partial otherwise; the root and its pages; the fence document too only
// when a chunk's commit outcome was unknown; nothing when the fence
// document names another writer.
func TestRecordOutcome(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t)
	committed := func(ops []op) BatchResult {
		r := chunkOf(1, ops)
		r.Success, r.CommittedAt = true, time.Now()
		return r
	}
	for _, tc := range []struct {
		name   string
		chunk  func(ops []op) BatchResult
		fence  func(t *testing.T, j *offlineRun) *pb.Document
		found  func(t *testing.T, j *offlineRun) map[string]*pb.Document
		want   Outcome
		writes int // after the root's
		err    error
	}{{
		name:  "complete",
		chunk: committed,
		want:  OutcomeComplete,
	}, {
		name: "partial",
		chunk: func(ops []op) BatchResult {
			r := chunkOf(1, ops)
			r.Err = errors.New("refused")
			return r
		},
		want: OutcomePartial,
	}, {
		name:  "unknown outcome, landed",
		chunk: func(ops []op) BatchResult { return unsureChunk(1, ops) },
		found: func(t *testing.T, j *offlineRun) map[string]*pb.Document {
			found := map[string]*pb.Document{}
			for _, id := range layout.DistrictIDs(j.in.Snap) {
				found[j.names.DistrictName(id)] = districtRead(t, j, id, j.in.Fence)
			}
			return found
		},
		want: OutcomeComplete, writes: 1,
	}, {
		name:  "unknown outcome, lost",
		chunk: func(ops []op) BatchResult { return unsureChunk(1, ops) },
		want:  OutcomePartial, writes: 1,
	}, {
		name:  "newer fence",
		chunk: committed,
		fence: func(t *testing.T, j *offlineRun) *pb.Document { return fenceRead(t, j, "000000000000002", "firestore") },
		err:   ErrFencedOut,
	}, {
		name:  "another backend",
		chunk: committed,
		fence: func(t *testing.T, j *offlineRun) *pb.Document { return fenceRead(t, j, j.in.Fence, "postgres") },
		err:   ErrFencedOut,
	}, {
		name:  "fence document gone",
		chunk: committed,
		fence: func(*testing.T, *offlineRun) *pb.Document { return nil },
		err:   ErrFencedOut,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := offlineJob(t, w, 5)
			b := tc.chunk(j.in.ops(nil))
			j.res.BatchResults = append(j.res.BatchResults, b)
			j.written.add(b)
			found := map[string]*pb.Document{}
			if tc.found != nil {
				found = tc.found(t, j)
			}
			found[j.names.Fence.Path] = fenceRead(t, j, j.in.Fence, j.in.Backend)
			if tc.fence != nil {
				found[j.names.Fence.Path] = tc.fence(t, j)
			}
			// As the finish's transaction runs it: the fence checked,
			// then the outcome recorded.
			a := &attempt{w: w, found: found}
			var r Result
			var set *written
			err := j.decide(context.Background(), txn{fenced: true, body: func(_ context.Context, a *attempt) (err error) {
				f, err := j.recordOutcome(a, j.res, j.written)
				r, set = f.res, f.written
				return err
			}}, a, j.names.Fence.Path)
			writes := a.writes
			if tc.err != nil {
				permanent := errors.As(err, new(*backoff.PermanentError))
				if !errors.Is(err, tc.err) || !permanent || writes != nil {
					t.Errorf("err %v (permanent %v), %d writes; want a permanent %v and nothing written", err, permanent, len(writes), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != tc.want || (set.ends[layout.DistrictIDs(j.in.Snap)[0]].ok) != (tc.want == OutcomeComplete) {
				t.Errorf("outcome %v, first district written %v; want %v", r.Outcome, set.ends[layout.DistrictIDs(j.in.Snap)[0]].ok, tc.want)
			}
			if len(writes) != 1+tc.writes || writes[0].GetUpdate().GetName() != j.names.Root.Path {
				t.Fatalf("%d writes, the first %v; want the root's and %d more", len(writes), writes[0], tc.writes)
			}
			status := layout.FieldsOf(asRead(t, writes[0]))["metadata"].(map[string]any)["status"]
			wantStatus := j.in.Snap.Status
			if tc.want != OutcomeComplete {
				wantStatus = layout.StatusPartial
			}
			if status != wantStatus {
				t.Errorf("the root's status %v, want %v", status, wantStatus)
			}
			if tc.writes == 1 && writes[1].GetUpdate().GetName() != j.names.Fence.Path {
				t.Errorf("the last write is %v, want the fence document's", writes[1])
			}
		})
	}
}

// The retry layer: a commit whose outcome is unknown is attempted again
// and reported as unsure, even when a later attempt succeeds; a job
// superseded by a newer writer starts no attempt.
func TestRetryOfUnknownOutcome(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t)
	j := offlineJob(t, w, 1)
	ctx := context.Background()
	attempts := 0
	st, err := j.retryAttempts(ctx, fastPolicy(), 0, func(context.Context, []byte) ([]byte, error) {
		attempts++
		if attempts == 1 {
			return nil, retry.Transient(&unknownOutcome{errors.New("connection reset")})
		}
		return nil, nil
	})
	if err != nil || !st.unsure || attempts != 2 || st.Attempts != 2 {
		t.Errorf("an unknown outcome, then success: err %v, unsure %v, %d attempts (stats %d); want nil, true, 2", err, st.unsure, attempts, st.Attempts)
	}
	st, err = j.retryAttempts(ctx, fastPolicy(), 0, func(context.Context, []byte) ([]byte, error) { return nil, retry.Permanent(errors.New("refused")) })
	if err == nil || st.unsure {
		t.Errorf("a refused commit: err %v, unsure %v; want the error, not unsure", err, st.unsure)
	}
	j.superseded.Store(true)
	attempts = 0
	_, err = j.retryAttempts(ctx, fastPolicy(), 0, func(context.Context, []byte) ([]byte, error) { attempts++; return nil, nil })
	if !errors.Is(err, errSuperseded) || attempts != 0 {
		t.Errorf("superseded: err %v after %d attempts; want errSuperseded before any", err, attempts)
	}
}

// The Result's counts: batch 0 is the root's transaction, the others
// chunks; districts are counted from the written set, failed ones in
// chunk order; stale deletes from the chunks that committed.
func TestTallyAssemblesResult(t *testing.T) {
	t.Parallel()
	s := newWritten()
	res := &Result{BatchResults: []BatchResult{
		{BatchIndex: 0, Success: true, DistrictIDs: []string{}},
		{BatchIndex: 1, Success: true, CommittedAt: time.Now(), DistrictIDs: []string{"b", "a"}, deletes: 2},
		{BatchIndex: 2, Err: errors.New("refused"), DistrictIDs: []string{"d", "c"}, deletes: 1},
		{BatchIndex: 3, Err: errors.New("reset"), unsure: true, DistrictIDs: []string{"e"}},
	}}
	for _, b := range res.BatchResults {
		s.add(b)
	}
	s.tally(res)
	got := fmt.Sprintf("%d %d %d %d %d %d %d %v %d", res.TotalBatches, res.SuccessfulBatches, res.FailedBatches,
		res.Chunks, res.SuccessfulChunks, res.FailedChunks, res.DistrictsWritten, res.FailedDistricts, res.StaleDeleted)
	if want := "4 2 2 3 1 2 2 [d c e] 2"; got != want {
		t.Errorf("batches, ok, failed, chunks, ok, failed, written, failed districts, stale deleted = %s, want %s", got, want)
	}
	// Without a written set (no chunk ran): the batches alone.
	root := &Result{BatchResults: res.BatchResults[:1]}
	(*written)(nil).tally(root)
	if root.TotalBatches != 1 || root.Chunks != 0 || root.DistrictsWritten != 0 || root.FailedDistricts == nil {
		t.Errorf("root only: %+v", root)
	}
}

// Complete and ManifestRecorded, the JSON's "complete" and
// "manifestRecorded", for each outcome.
func TestResultEndings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r                  Result
		complete, recorded bool
	}{
		{Result{Outcome: OutcomeComplete}, true, true},
		{Result{Outcome: OutcomeSkipped}, true, true},
		{Result{Outcome: OutcomePartial, TotalBatches: 2}, false, true},
		{Result{Outcome: OutcomeNotRecorded, TotalBatches: 3}, true, false},
		{Result{Outcome: OutcomeNotRecorded, TotalBatches: 3, FailedBatches: 1}, false, false},
		{Result{Outcome: OutcomeNotWritten}, false, false},
		{Result{Outcome: OutcomeFencedOut, TotalBatches: 1, FailedBatches: 1}, false, false},
	} {
		if c, m := tc.r.Complete(), tc.r.ManifestRecorded(); c != tc.complete || m != tc.recorded {
			t.Errorf("%v (%d batches, %d failed): complete %v, manifest recorded %v; want %v, %v",
				tc.r.Outcome, tc.r.TotalBatches, tc.r.FailedBatches, c, m, tc.complete, tc.recorded)
		}
	}
}

// A stored root is resumed only when it is an unfinished write of the
// same input by the same lock backend and key; and the stale districts of
// a write are the stored documents its input does not have.
func TestResumableAndStale(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t)
	j := offlineJob(t, w, 4)
	root, _, err := j.in.RootDoc()
	if err != nil {
		t.Fatal(err)
	}
	if !resumable(&root, j.in) {
		t.Error("the root of a write of this input in progress is not resumable")
	}
	for name, change := range map[string]func(in *rootInput){
		"another input":   func(in *rootInput) { in.PayloadHash = "other" },
		"another backend": func(in *rootInput) { in.Backend = "postgres" },
		"another key":     func(in *rootInput) { in.KeyHash = "other" },
	} {
		in := j.in
		change(&in)
		if resumable(&root, in) {
			t.Errorf("%s: resumable", name)
		}
	}

	ids := layout.DistrictIDs(j.in.Snap)
	stored := []string{layout.DistrictDocID("z"), layout.DistrictDocID(ids[1]), layout.DistrictDocID("a"), layout.DistrictDocID(ids[0])}
	if got := staleOf(stored, j.in.Snap); !slices.Equal(got, []string{"a", "z"}) {
		t.Errorf("staleOf = %v, want [a z]", got)
	}
}

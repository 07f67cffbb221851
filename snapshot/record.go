package snapshot

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// A write's progress reaches the root through one recorder, never through
// the chunks. Firestore serialises commits to one document (and past about
// one a second it answers ABORTED "too much contention"), and every root
// commit rewrites a document of up to 1 MiB and its index entries: chunks
// that each recorded themselves in the root made the root the hottest
// document of the system, with a cost that grew with the square of the
// snapshot. Instead, chunks write their district documents and nothing
// else, and the recorder commits every chunk outcome since its last record
// in one fenced transaction, at most once per record interval.
//
// What the root says is therefore never more than what is stored — a
// district is recorded only after its chunk committed — and lags the
// documents by at most one interval plus two commits: the record under
// way when a chunk committed, and the next, which starts an interval
// after that one returned. A writer killed in
// between leaves districts written but not recorded: their documents carry
// the root's writerFence, which is how Repair and a rerun find them and
// record them without writing them again, and how Verify tells them from
// strays while the root says "writing".

// recorder keeps a write's written set while its chunks run, and records
// the districts written, and those whose chunks failed for good, in its
// root (and manifest pages) in the background.
type recorder struct {
	// commit records state st and the manifest pages (by number) that
	// changed, as one attempt bounded by ctx.
	commit  func(ctx context.Context, st layout.State, pages []int) error
	paged   func(id string) (page int, ok bool) // the page of a district, in the paged form
	log     *zap.Logger
	every   time.Duration
	timeout time.Duration // of one record's commit
	// since is when the root was last written before the recorder
	// started (the root transaction): the first record keeps the
	// interval from it, as every record does from the one before.
	since time.Time

	mu      sync.Mutex
	set     *written      // what the chunks did so far
	dirty   map[int]bool  // manifest pages holding districts not recorded yet
	fresh   int           // districts written or failed since the last record
	changed chan struct{} // signalled (without blocking) by add

	cancel context.CancelFunc // ends run, and a record in flight
	done   chan struct{}      // closed when run returns
}

// startRecorder starts the recorder of a job whose root is committed. It
// records under the job's wctx: when the lease is lost or the grace
// period ends, recording stops, and the finish records all.
func (j *job) startRecorder() *recorder {
	commit := func(ctx context.Context, st layout.State, pages []int) error {
		ctx, span := j.w.tel.start(ctx, SpanRecord, attrDistricts.Int(len(st.Entries)), attrPages.Int(len(pages)))
		rootName := j.names.Root.Path
		_, err := j.attempt(ctx, txn{fenced: true, explicitBegin: true, reads: []string{rootName},
			body: func(_ context.Context, a *attempt) error {
				if a.doc(rootName) == nil {
					return status.Errorf(codes.NotFound, "snapshot %s: the root document is gone", j.in.ID)
				}
				writes, err := j.rootRecord(st, pages)
				a.write(writes...)
				return err
			}}, nil)
		endSpan(span, err)
		if err == nil {
			j.rootCommits.Add(1)
		}
		return err
	}
	paged := func(id string) (int, bool) { p, ok := j.in.PageOf[id]; return p, ok }
	r := &recorder{commit: commit, paged: paged, log: j.log, every: j.w.cfg.recordEvery, timeout: j.w.cfg.retry.AttemptTimeout, since: time.Now()}
	return r.start(j.wctx)
}

// start starts r, whose commit, paged, log, every and timeout are set: it
// records under ctx, with commit, at most once every r.every.
func (r *recorder) start(ctx context.Context) *recorder {
	ctx, r.cancel = context.WithCancel(ctx)
	r.set, r.dirty = newWritten(), make(map[int]bool)
	r.changed, r.done = make(chan struct{}, 1), make(chan struct{})
	go r.run(ctx)
	return r
}

// add notes chunk result b in the written set; a chunk that committed
// districts, or failed for good (settled), is news for the next record,
// and so are the manifest pages holding its districts. A chunk of unknown
// outcome, or never attempted, is not: the root keeps its districts not
// written yet, and the finish records how they ended.
func (r *recorder) add(b BatchResult) {
	r.mu.Lock()
	r.set.add(b)
	ids := b.DistrictIDs
	if !settled(b) || len(ids) == 0 {
		r.mu.Unlock()
		return
	}
	for _, id := range ids {
		if p, ok := r.paged(id); ok {
			r.dirty[p] = true
		}
	}
	r.fresh += len(ids)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// close stops the recorder, abandoning a record in flight, and waits for
// it to return, so that the finish, which comes next, is the last commit
// to the root; it returns the written set. An abandoned record that lands anyway cannot land after the
// finish: it read the root, which the finish writes, so one of the two
// would be aborted.
func (r *recorder) close() *written {
	r.cancel()
	<-r.done
	return r.set
}

// maxRecordBackoff bounds how far the store's contention on the root
// spaces the records: at most this many intervals apart.
const maxRecordBackoff = 8

// run records whenever districts were written since the last record, at
// most once per interval: it waits for news, then for the interval since
// its last record returned (or the root's commit did) to pass, then
// commits everything known by then. When the store refuses a record for
// load — ABORTED, contention on the root, which Firestore sustains about
// one write a second of; or RESOURCE_EXHAUSTED — the interval doubles, up to
// maxRecordBackoff times the configured one, and each record that
// succeeds takes one configured interval off again: the root is written
// less often while the store asks for it.
func (r *recorder) run(ctx context.Context) {
	defer close(r.done)
	last, every := r.since, r.every
	for {
		select {
		case <-r.changed:
		case <-ctx.Done():
			return
		}
		if wait := every - time.Since(last); !last.IsZero() && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		err := r.record(ctx)
		// The interval counts from the record's return, not its start:
		// a commit lands at the store before it returns, so records land
		// at least the interval apart whatever their latency (from their
		// starts, a slow record and a quick one land closer). The root
		// then has its burst to spare for the finish, which may follow
		// the last record at once.
		last = time.Now()
		every = r.nextInterval(every, err)
		if err != nil {
			if ctx.Err() != nil {
				return // closed: the finish records all
			}
			if errors.Is(err, ErrFencedOut) {
				r.log.Warn("recording progress: fenced out by a newer writer; recording stops", zap.Error(err))
				return
			}
			// The finish records everything anyway; the next record
			// tries again with whatever has been written since.
			// Push-back was logged by nextInterval.
			if c := status.Code(err); c != codes.Aborted && c != codes.ResourceExhausted {
				r.log.Warn("recording progress in the root failed; retrying at the next record", zap.Error(err))
			}
			select {
			case r.changed <- struct{}{}:
			default:
			}
		}
	}
}

// nextInterval is the interval after a record that ended with err, from
// the interval every before it.
func (r *recorder) nextInterval(every time.Duration, err error) time.Duration {
	switch status.Code(err) {
	case codes.OK:
		return max(r.every, every-r.every)
	case codes.Aborted, codes.ResourceExhausted:
		next := min(2*every, maxRecordBackoff*r.every)
		if next > every {
			r.log.Info("the store pushed back on the root's progress records: recording less often",
				zap.Duration("recordInterval", next), zap.Error(err))
		}
		return next
	}
	return every
}

// record commits what has been written (or has failed) so far, if
// anything is new.
func (r *recorder) record(ctx context.Context) error {
	r.mu.Lock()
	if r.fresh == 0 {
		r.mu.Unlock()
		return nil
	}
	st := r.set.progress()
	pages := make([]int, 0, len(r.dirty))
	for p := range r.dirty {
		pages = append(pages, p)
	}
	fresh := r.fresh
	r.fresh, r.dirty = 0, make(map[int]bool)
	r.mu.Unlock()

	actx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	t0 := time.Now()
	err := r.commit(actx, st, pages)
	if err != nil {
		// Not recorded: put the news back for the next record.
		r.mu.Lock()
		r.fresh += fresh
		for _, p := range pages {
			r.dirty[p] = true
		}
		r.mu.Unlock()
		r.log.Debug("progress not recorded", zap.Int64("durationMs", time.Since(t0).Milliseconds()), zap.Error(err))
		return err
	}
	r.log.Debug("progress recorded", zap.Int("districtsRecorded", len(st.Entries)), zap.Int("new", fresh),
		zap.Int("pages", len(pages)), zap.Int64("durationMs", time.Since(t0).Milliseconds()))
	return nil
}

// rootRecord is the writes that record state st in the root: its
// metadata and manifest, and the manifest pages (by number) whose entries
// changed — all of them when pages is nil. A progress record makes them
// in a fenced transaction that also reads the root: a record commit
// delayed past the finish would otherwise overwrite the finished root with
// a stale one, whereas with the root read, the finish's write of the root
// makes such a commit fail. The finish makes them with every page.
func (j *job) rootRecord(st layout.State, pages []int) ([]*pb.Write, error) {
	in := &j.in
	md, err := in.Metadata(st)
	if err != nil {
		return nil, retry.Permanent(err)
	}
	mf, all := in.Split(in.Manifest(st))
	root, err := layout.UpdateWrite(j.names.Root.Path, map[string]any{"metadata": layout.EncodeFields(md), "manifest": layout.EncodeFields(mf)})
	if err != nil {
		return nil, retry.Permanent(err)
	}
	writes := []*pb.Write{root}
	if pages == nil {
		pages = make([]int, len(all))
		for i := range all {
			pages[i] = i
		}
	}
	for _, p := range pages {
		w, err := layout.SetWrite(j.names.Page(p).Path, all[p])
		if err != nil {
			return nil, retry.Permanent(err)
		}
		writes = append(writes, w)
	}
	return writes, nil
}

package snapshot

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// errSuperseded ends a finish whose lease, already lost, has passed to a
// newer holder.
var errSuperseded = errors.New("the lock has passed to a newer writer")

// supersededPoll is how often a writer whose lease is lost asks the lock
// store, while it records its manifest, whether a newer writer holds the
// lock.
const supersededPoll = time.Second

// watchSuperseded sets j.superseded once the lease, already lost, has
// passed to a newer holder: the lock on the snapshot's key is held under a
// higher fence. That writer is about to write the root (or waiting to), so
// this one's finish would only contend with its root transaction for the
// fence and root documents — the two can keep aborting each other for the
// whole contention wait, until the newer writer gives up — and the fence check would refuse the finish once the newer root
// landed. A superseded writer leaves the snapshot to the newer one, as a
// fenced-out writer does; its root says writing, recording no more than
// was written, until the newer writer replaces it (or a repair completes
// it). The store is asked once before it returns, so that a writer already
// superseded makes no attempt of its finish, then every supersededPoll (a
// partition may hide the newer holder at first, and the finish retries
// contention for minutes); lookups that fail decide nothing. The finish
// stops between attempts (retry), never inside one: a transaction cut off
// by a cancelled context is not rolled back, and would hold its reads for
// Firestore's 60 s against the newer writer. stop ends the watch.
func (j *job) watchSuperseded() (stop func()) {
	lease := j.lease
	if lease.Err() == nil || lease.Fence() == "" {
		return func() {}
	}
	newer := func(ctx context.Context) bool {
		lctx, lcancel := context.WithTimeout(ctx, 2*supersededPoll)
		defer lcancel()
		info, err := locking.GetByKey(lctx, j.w.locker, lease.Key())
		// Fences are fixed-width digit strings: they compare as strings.
		return err == nil && info != nil && info.Fence > lease.Fence()
	}
	wctx, end := context.WithCancel(context.WithoutCancel(j.ctx))
	if newer(wctx) {
		j.superseded.Store(true)
		end()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(supersededPoll)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			if newer(wctx) {
				j.superseded.Store(true)
				return
			}
		}
	}()
	return func() { end(); <-done }
}

// finishTimeout bounds the finish: long enough to outlast a stalled
// transaction (the contention wait) plus one attempt.
func (w *Writer) finishTimeout() time.Duration {
	return max(w.cfg.contention+w.cfg.retry.AttemptTimeout, time.Minute)
}

// finished is what the finish recorded: the write's Result, tallied, with
// its Outcome, and its written set, the chunks of unknown outcome decided.
type finished struct {
	res     Result
	written *written
}

// finish records the outcome of the write whose Result so far is res (the
// root's and the chunks' batch results) and whose chunks ended as set
// says in the root: manifest entries, lists, counts, status
// (recordOutcome); it returns what it recorded.
// It runs even when the job's ctx was cancelled or the lease lost: the
// manifest must say what happened, and its fence check keeps it from
// touching a newer writer's snapshot. It stops before its first attempt,
// or between two, once the lost lease has passed to a newer writer
// (watchSuperseded): then it returns errSuperseded.
func (j *job) finish(res *Result, set *written) (finished, error) {
	stop := j.watchSuperseded()
	defer stop()
	j.log.Info("recording the manifest")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), j.w.finishTimeout())
	defer cancel()
	ctx, span := j.w.tel.start(ctx, SpanFinish)
	var done finished
	// The finish retries transient failures until its own deadline, not
	// the retry policy's count: a manifest not recorded leaves the
	// snapshot "in progress" until a repair, and a connection reset every
	// second outlasts four attempts. Short waits, so that more attempts
	// fit.
	p := j.w.cfg.retry
	p.MaxRetries, p.Max = math.MaxInt32, min(p.Max, 4*time.Second)
	// One read begins the transaction: the fence document, and the
	// documents of the chunks whose outcome is unknown (resolve).
	st, err := j.transact(ctx, p, txn{fenced: true, reads: j.unsureDocs(res),
		body: func(_ context.Context, a *attempt) error {
			f, err := j.recordOutcome(a, res, set)
			if err == nil {
				done = f
			}
			return err
		}})
	endStep(span, st.Stats, err)
	if err != nil {
		return finished{}, err
	}
	j.rootCommits.Add(1)
	return done, nil
}

// recordOutcome adds to the finish's attempt a (whose transaction checked
// the fence) the writes that record the job's outcome: chunks whose
// outcome is unknown are decided from their documents, read in the same
// transaction, so the manifest it records is exact; and then it writes
// the fence document too, so that no such chunk commit can land after
// it. res and set are the write's Result and written set before the
// finish, left alone (the transaction may run again); it returns them as
// recorded, the Result's Outcome complete or partial.
func (j *job) recordOutcome(a *attempt, res *Result, set *written) (finished, error) {
	in := &j.in
	r, decided := j.resolve(a.found, res, set)
	now := j.w.cfg.now()
	st := decided.finished(in.Snap.Status, r.FailedBatches == 0, now)
	for _, id := range layout.DistrictIDs(in.Snap) {
		st.Complete = st.Complete && in.Stored(st, id)
	}
	if !st.Complete {
		st.Status = layout.StatusPartial
	}
	writes, err := j.rootRecord(st, nil)
	if err != nil {
		return finished{}, err
	}
	a.write(writes...)
	r.Outcome = OutcomePartial
	if st.Complete {
		r.Outcome = OutcomeComplete
	}
	if !anyUnsure(res) {
		return finished{r, decided}, nil
	}
	// A chunk whose commit outcome is unknown may still land: writing the
	// fence document, which every chunk reads, makes such a commit
	// conflict with this one, so the outcome recorded is exact. Only
	// then: a chunk whose fence read began its transaction and lost its
	// answer holds that document until Firestore expires the transaction
	// (60 s), and a finish writing it would wait as long.
	if err := a.set(j.names.Fence.Path, in.FenceDoc(now)); err != nil {
		return finished{}, err
	}
	return finished{r, decided}, nil
}

// anyUnsure reports whether a chunk of res has a commit of unknown outcome.
func anyUnsure(res *Result) bool {
	for _, b := range res.BatchResults {
		if b.unsure {
			return true
		}
	}
	return false
}

// unsureDocs are the names of the district documents of res's chunks
// whose commit outcome is unknown, in chunk order: what resolve decides
// them from.
func (j *job) unsureDocs(res *Result) []string {
	var names []string
	for _, b := range res.BatchResults {
		if b.unsure {
			for _, o := range b.ops {
				names = append(names, j.names.DistrictName(o.districtID))
			}
		}
	}
	return names
}

// resolve decides the chunks of res whose commit outcome is unknown from
// their documents as the finish's transaction read them (found, by name;
// unsureDocs): a district is written when its document carries this
// writer's fence, a stale district deleted when its document is gone. It
// returns res, tallied, and the written set s with those chunks decided,
// leaving the originals alone (the transaction may run again). Read in the
// transaction that records the manifest, the documents make the record
// exact: a late commit of such a chunk either comes before it, and is
// seen, or conflicts with it, and one of the two is aborted.
func (j *job) resolve(found map[string]*pb.Document, res *Result, s *written) (Result, *written) {
	in := &j.in
	r := *res
	r.BatchResults = slices.Clone(res.BatchResults)
	if !anyUnsure(res) {
		s.tally(&r)
		return r, s
	}
	decided := s.clone()
	decided.decided = true
	for i := range r.BatchResults {
		b := &r.BatchResults[i]
		if !b.unsure {
			continue
		}
		ok := true
		for _, o := range b.ops {
			d := found[j.names.DistrictName(o.districtID)]
			if o.district == nil {
				ok = ok && d == nil
				continue
			}
			mine := d != nil && fenceOf(layout.FieldsOf(d)) == in.Fence
			ok = ok && mine
			end := districtEnd{ok: true}
			if !mine {
				end = districtEnd{msg: "not written (" + errText(b.Err) + ")"}
			}
			decided.ends[o.districtID] = end
		}
		b.unsure = false
		if ok {
			b.Success, b.Err = true, nil
		} else {
			b.Err = fmt.Errorf("not written (%w)", b.Err)
		}
	}
	decided.tally(&r)
	return r, decided
}

// fenceOf is the fence a district document, given its fields, was
// written under.
func fenceOf(doc map[string]any) string {
	var env layout.Envelope
	layout.DecodeFields(doc, &env)
	return env.WriterFence
}

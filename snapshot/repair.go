package snapshot

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/iterator"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// errReplace: WithRewriteChanged found the input's root payload differs
// from the stored one; the repair becomes a whole write.
var errReplace = errors.New("the root payload differs")

// maxListed bounds how many differences an ErrMismatch names.
const maxListed = 5

// ChangedError is the cause of an ErrMismatch that WithRewriteChanged
// lifts: the input has the stored snapshot's districts, but its root
// payload, or districts stored intact, hold other data. errors.As finds
// it, so a caller can tell this refusal from one only a write resolves
// (the sets of districts differ) without reading the message.
type ChangedError struct {
	// Changed names the first differences, in the manifest's order: "the
	// root payload (metadata, rankings, …)" and "district <id>".
	Changed []string
	// More counts the differences found and not named.
	More int
}

func (e *ChangedError) Error() string {
	more := ""
	if e.More > 0 {
		more = fmt.Sprintf(" and %d more", e.More)
	}
	return "the input differs from what is stored in " + strings.Join(e.Changed, ", ") + more
}

// Repair completes a partial write of snapshot id: under the snapshot's
// lock it takes the root over with its own fence, re-writes exactly the
// districts the manifest does not record as written (failed, or still
// pending after a write that died) and those whose document is missing or
// no longer matches the content hash the manifest recorded, deletes
// district documents the snapshot does not have, and records the outcome
// like Write does. snap must be the snapshot that was written: the same
// districts, the same root payload (by hash, where the root recorded one)
// and, for every district already written, the same data; otherwise Repair
// refuses with ErrMismatch, naming the first differences, and writes
// nothing — unless WithRewriteChanged, which re-writes the differing
// districts too (and the whole snapshot when the root payload differs).
// Either way a repaired snapshot never mixes two inputs.
//
// A complete snapshot is left alone: the Result's Outcome is
// OutcomeSkipped and the error is nil. A snapshot that does not exist is
// written whole, as Write does (a writer that died before its root leaves
// nothing to repair but the snapshot still to be written). An input that does not match the
// stored manifest is ErrMismatch. Errors are those of Write.
func (w *Writer) Repair(ctx context.Context, id string, snap *model.Snapshot) (*Result, error) {
	return w.run(ctx, opRepair, id, snap)
}

// takeover is what takeOver found: the districts to write, those kept as
// they are stored, and its root transaction (nil when it never ran or
// was refused).
type takeover struct {
	todo map[string]bool
	kept map[string]layout.Kept
	root *BatchResult
}

// takeOver reads the stored root and district documents in a
// transaction, works out which districts need writing, and replaces the
// root by this writer's: its fence, status "partial" and writeState
// "writing", the input's payload, and a manifest and lists that record the
// districts it keeps as written and the others as not written yet — so
// the root says what is stored from here on, whoever wrote it before
// (snapwriter, an earlier version, or the application). Chunks of an older
// writer still in flight are refused from now on. It returns errSkip for a
// complete snapshot.
func (j *job) takeOver(rewrite bool) (takeover, error) {
	in := &j.in
	ref := j.names.Root
	var todo map[string]bool
	var kept map[string]layout.Kept
	var refused error // repairSet's ErrMismatch or errReplace
	r := BatchResult{BatchIndex: 0, OperationCount: 1, DistrictIDs: []string{}}
	// A repair keeps stored data that equals the input's as Firestore
	// compares values (the application's client stores 39.0 as 39); a
	// Write resuming its own unfinished write keeps only what it would
	// write, to the byte. Made once, outside the transaction: what it
	// learns of the input outlives the transaction's retries.
	inData := newInputData(in.Snap, in.DataHashes, in.Repairing)
	t0 := time.Now()
	sctx, span := j.w.tel.start(j.wctx, SpanRoot, attrTakeover.Bool(true))
	rootName := ref.Path
	st, err := j.transact(sctx, j.w.cfg.retry, txn{explicitBegin: true, reads: []string{rootName},
		body: func(ctx context.Context, a *attempt) error {
			doc := a.doc(rootName)
			if doc == nil {
				return retry.Permanent(fmt.Errorf("snapshot %s: %w", in.ID, ErrNotFound))
			}
			storedRoot := layout.DecodeRoot(layout.FieldsOf(doc))
			if err := j.checkPrior(ctx, storedRoot.Meta()); err != nil {
				return retry.Permanent(err)
			}
			districts := a.stream(ctx, rootName, &pb.StructuredQuery{From: []*pb.StructuredQuery_CollectionSelector{{CollectionId: layout.DistrictsCollection}}})
			stored, err := readStoredDistricts(apiDocs(districts), inData)
			if err != nil {
				return err
			}
			// The pages of a paged root hold its entries; any other page is
			// stale and deleted below.
			pageDocs, err := a.query(ctx, rootName, &pb.StructuredQuery{From: []*pb.StructuredQuery_CollectionSelector{{CollectionId: layout.PagesCollection}}})
			if err != nil {
				return fmt.Errorf("reading manifest pages: %w", err)
			}
			pages := layout.APIPages(pageDocs)
			storedPages := make([]string, len(pages))
			for i, p := range pages {
				storedPages[i] = p.ID
			}
			dec, err := in.decideRepair(storedRoot, pages, inData, stored, rewrite)
			switch {
			case errors.Is(err, errSkip):
				return retry.Permanent(errSkip)
			case err != nil:
				refused = err
				return retry.Permanent(err)
			}
			todo, kept = dec.todo(), dec.kept
			root, newPages, err := in.keeping(kept).RootDoc()
			if err != nil {
				return retry.Permanent(err)
			}
			sets, err := j.rootWrites(root, newPages)
			if err != nil {
				return err
			}
			a.write(j.withPageDeletes(sets, len(newPages), storedPages)...)
			return nil
		}})
	r.RetryAttempts, r.DurationMs = st.Retries, time.Since(t0).Milliseconds()
	endStep(span, st.Stats, err)
	switch {
	case errors.Is(err, errSkip):
		return takeover{}, err
	case refused != nil:
		// The input's own problem, found on the first attempt: no
		// "after 1 attempt" prefix.
		return takeover{}, withID(in.ID, refused)
	case errors.Is(err, ErrNotFound):
		return takeover{}, err
	case err != nil:
		r.Err = err
		if refusedByPrior(err) {
			return takeover{root: &r}, withID(in.ID, err)
		}
		return takeover{root: &r}, newError(in.ID, ErrRootFailed, err)
	}
	r.Success = true
	j.rootCommits.Add(1)
	return takeover{todo: todo, kept: kept, root: &r}, nil
}

// keeping is in as the root of a takeover records it: with the districts
// it keeps as they are stored. in holds no state of the write (the job
// does), so the copy shares nothing that changes.
func (in rootInput) keeping(kept map[string]layout.Kept) rootInput {
	in.Kept = kept
	return in
}

// storedDistrict is what Repair and Verify need of a stored district
// document: its districtHash, the hash of its data alone, and its size.
type storedDistrict struct {
	hash, dataHash string
	// numbersHash is the hash of the data's normal form (normalNumbers),
	// set where an input's data is compared with it and its dataHash is
	// not the input's.
	numbersHash string
	size        int64
	fence       string    // the writerFence it was written under
	updated     time.Time // when it was last written
}

// readStoredDistricts reads every district document it gives, one at a
// time: only their hashes are kept, so that a snapshot of 20,000 districts
// is never held whole. in (nil when there is none) is the input the data
// is compared with.
func readStoredDistricts(docs iter.Seq2[storedDoc, error], in *inputData) (map[string]storedDistrict, error) {
	out := map[string]storedDistrict{}
	for d, err := range docs {
		if err != nil {
			return nil, err
		}
		h, dh, err := layout.DistrictHashes(d.fields)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.id, err)
		}
		id := strings.TrimPrefix(d.id, layout.DistrictDocPrefix)
		s := storedDistrict{hash: h, dataHash: dh, size: int64(model.FirestoreSize(d.fields)), fence: fenceOf(d.fields), updated: d.updated}
		if in.needsNumbers(id, dh) {
			// Only here: data equal to the input's to the byte, the
			// usual case, needs no second hash.
			if s.numbersHash, err = numbersHash(d.fields[layout.FieldData], dh); err != nil {
				return nil, fmt.Errorf("%s: %w", d.id, err)
			}
		}
		out[id] = s
	}
	return out, nil
}

// storedDoc is a stored document as read: its id, its fields as
// DocumentSnapshot.Data gives them, and when it was last written.
type storedDoc struct {
	id      string
	fields  map[string]any
	updated time.Time
}

// clientDocs are the documents of it, read by the Firestore client, one
// at a time.
func clientDocs(it *firestore.DocumentIterator) iter.Seq2[storedDoc, error] {
	return func(yield func(storedDoc, error) bool) {
		defer it.Stop()
		for {
			d, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return
			}
			if err != nil {
				yield(storedDoc{}, err)
				return
			}
			if !yield(storedDoc{id: d.Ref.ID, fields: d.Data(), updated: d.UpdateTime}, nil) {
				return
			}
		}
	}
}

// apiDocs are the documents of docs, read on the Firestore API, one at a
// time.
func apiDocs(docs iter.Seq2[*pb.Document, error]) iter.Seq2[storedDoc, error] {
	return func(yield func(storedDoc, error) bool) {
		for d, err := range docs {
			if err != nil {
				yield(storedDoc{}, err)
				return
			}
			if !yield(storedDoc{id: layout.BaseName(d.GetName()), fields: layout.FieldsOf(d), updated: d.GetUpdateTime().AsTime()}, nil) {
				return
			}
		}
	}
}

// RewriteReason says why a repair (or a write completing its own
// unfinished write) writes a district again.
type RewriteReason string

// The reasons a district is written again.
const (
	// RewriteFailed: the manifest records its chunk as failed.
	RewriteFailed RewriteReason = "failed"
	// RewritePending: the manifest records it as not written yet (its
	// writer stopped before its chunk).
	RewritePending RewriteReason = "pending"
	// RewriteMissing: the manifest records it as written, but its
	// document is absent.
	RewriteMissing RewriteReason = "missing"
	// RewriteAltered: its document no longer matches the content hash
	// the manifest recorded.
	RewriteAltered RewriteReason = "altered"
	// RewriteChanged: it is stored intact, with other data than the
	// input's (WithRewriteChanged).
	RewriteChanged RewriteReason = "changed"
)

// repairDecision is what a repair does with the districts of a stored
// snapshot: those it writes, and why (rewrite), and those it keeps as
// they are stored.
type repairDecision struct {
	rewrite map[string]RewriteReason
	kept    map[string]layout.Kept
}

// todo is the set of districts d writes.
func (d repairDecision) todo() map[string]bool {
	todo := make(map[string]bool, len(d.rewrite))
	for id := range d.rewrite {
		todo[id] = true
	}
	return todo
}

// decideRepair is the decision of a repair (or of a write completing its
// own unfinished write) on the stored snapshot: its root (whose manifest
// it expands from the stored manifest pages), its district
// documents (stored) and inData, the input's data to compare them with.
// The repair's root transaction and its dry run (PlanRepair) both call it,
// so that a plan says what the repair does. It returns errSkip for a
// snapshot that is complete and needs nothing, and repairSet's errors.
func (in rootInput) decideRepair(root *layout.Root, pages []layout.StoredPage, inData *inputData, stored map[string]storedDistrict, rewrite bool) (repairDecision, error) {
	root.ExpandPages(pages)
	d, err := in.repairSet(root, inData, stored, rewrite)
	if err != nil {
		return repairDecision{}, err
	}
	if md := root.Meta(); len(d.rewrite) == 0 && md.WrittenWhole() && !md.Legacy() {
		return repairDecision{}, errSkip
	}
	return d, nil
}

// repairSet checks that the input is the snapshot the stored root
// describes and returns the districts to write: those the manifest does
// not record as written, and those whose document is missing or altered
// (it no longer matches the hash the manifest recorded). A district written
// intact with other data than the input's (inData compares them), or
// another root payload, is ErrMismatch — or, WithRewriteChanged, a
// district to write again and errReplace.
func (in rootInput) repairSet(root *layout.Root, inData *inputData, stored map[string]storedDistrict, rewrite bool) (repairDecision, error) {
	entries := root.Manifest.Districts
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.DistrictID)
	}
	given := layout.DistrictIDs(in.Snap)
	slices.Sort(ids)
	slices.Sort(given)
	if !slices.Equal(ids, given) {
		return repairDecision{}, fmt.Errorf("%w: the manifest lists %s, the input has %d, and the sets differ; write the snapshot instead",
			ErrMismatch, plural.N(len(ids), "district"), len(given))
	}
	var diffs []string
	// Roots written before content hashes (or by the TypeScript
	// application) did not record one: their payload is not compared.
	md := root.Meta()
	if md.PayloadHash != "" {
		same, err := samePayload(root, in.Snap)
		if err != nil {
			return repairDecision{}, err
		}
		if !same && rewrite {
			return repairDecision{}, errReplace
		}
		if !same {
			diffs = append(diffs, "the root payload (metadata, rankings, …)")
		}
	}
	todo := map[string]RewriteReason{}
	kept := map[string]layout.Kept{}
	rootFence := md.WriterFence
	for _, e := range entries {
		id, recorded := e.DistrictID, e.ContentHash
		s, present := stored[id]
		switch st := e.Status; {
		case st != layout.EntrySuccess && present && md.Unrecorded(s.fence) && s.hash == in.HashUnder(id, rootFence):
			// Written by the root's writer, which died (or lost its
			// lease) before recording it: its document is this input's,
			// to the byte, so it is recorded as it is, not written again.
			// (Byte-exact, not as Firestore compares: one that is not is
			// written again, which is never wrong.)
			kept[id] = layout.Kept{Modified: layout.IsoMillis(s.updated), Hash: s.hash, Size: s.size}
		case st != layout.EntrySuccess:
			todo[id] = RewriteFailed
			if e.ErrorMessage == layout.NotWrittenYet {
				todo[id] = RewritePending
			}
		case !present:
			todo[id] = RewriteMissing
		case recorded != "" && s.hash != recorded:
			todo[id] = RewriteAltered // since it was written
		default:
			same, err := inData.same(id, s)
			switch {
			case err != nil:
				return repairDecision{}, fmt.Errorf("district %s: %w", id, err)
			case same:
				kept[id] = layout.Kept{Modified: e.LastModified, Hash: s.hash, Size: s.size}
			case rewrite:
				todo[id] = RewriteChanged
			default:
				diffs = append(diffs, "district "+id)
			}
		}
	}
	if len(diffs) > 0 {
		listed := diffs[:min(len(diffs), maxListed)]
		changed := &ChangedError{Changed: listed, More: len(diffs) - len(listed)}
		return repairDecision{}, fmt.Errorf("%w: %w; write the snapshot instead (it replaces it under the lock)", ErrMismatch, changed)
	}
	return repairDecision{rewrite: todo, kept: kept}, nil
}

package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// streamBatch is how many district documents WriteJSON reads at a time.
const streamBatch = 100

// WriteJSON writes the snapshot stored under id to w as the Snapshot JSON
// that json.Encoder writes of Get's result (indented by two spaces when
// indent is set, else on one line; followed by a newline), and returns how
// many districts it wrote. Get holds every district document at once, as
// Firestore maps and again as the snapshot's JSON; WriteJSON reads the
// district documents streamBatch at a time, in manifest order, and writes
// each as it comes, so that it holds a batch, not the snapshot.
//
// It reads what Get reads, with one difference: a district is read from
// its own document (district_{id}), where Get takes every document of the
// districts collection under the districtId it holds; the two differ only
// on a document stored under another district's id, which WriteJSON
// leaves out. Like Get, it reads the snapshot as it was at one moment, the
// root's read (see view); the district documents in read-only transactions
// at that read time, a new one every readOnlyBudget, so that a consumer
// that reads w slowly never outlasts a transaction. When it fails after it
// has begun writing, w holds an incomplete snapshot.
//
// It returns how many districts it wrote and the summary of the root it
// wrote them from: whether the output is the whole snapshot is that
// summary's State (StateComplete or StateUnsuccessful), not a later read's,
// which may find a write finished since. That State is not settled: a root
// that says a write is in progress is StateUnknown, whether or not its
// writer lives (Summary asks the lock backend).
func (r *Reader) WriteJSON(ctx context.Context, w io.Writer, id string, indent bool) (int, Summary, error) {
	ref := r.names(id).Root
	rd, v, err := r.openWhole(ctx, ref)
	if err != nil {
		return 0, Summary{}, err
	}
	// With the manifest whole: the pending districts of a root that says
	// "writing" are told from its failed ones.
	asRead := summaryOf(id, rd)
	districts := v.collection(ref, layout.DistrictsCollection)
	written := rd.RecordedWritten()
	order, err := streamOrder(ctx, rd, written, districts)
	if err != nil {
		return 0, Summary{}, fmt.Errorf("reading districts of %s: %w", id, err)
	}
	st, err := newSkeleton(rd, indent)
	if err != nil {
		return 0, Summary{}, fmt.Errorf("decoding snapshot %s: %w", id, err)
	}
	refs := make([]*firestore.DocumentRef, len(order))
	for i, dID := range order {
		refs[i] = districts.Doc(layout.DistrictDocID(dID))
	}
	n := 0
	var piece []byte
	// consume writes the districts of one batch: its errors (decoding, or
	// writing to w) are returned as they are, not as reading errors.
	consume := func(docs []*firestore.DocumentSnapshot) error {
		for _, doc := range docs {
			if !doc.Exists() {
				continue
			}
			dd := layout.ReadDistrict(doc)
			// Get's filter: the districts recorded as written, stored
			// under their own id.
			dID := dd.DistrictID
			if dID == "" || dd.Status == layout.EntryFailed || written != nil && !written[dID] || layout.DistrictDocID(dID) != doc.Ref.ID {
				continue
			}
			stats := dd.Data
			if stats == nil {
				return fmt.Errorf("decoding snapshot %s: district %s: want a district object, got no data", id, dID)
			}
			if piece, err = st.district(piece[:0], stats, n > 0); err != nil {
				return fmt.Errorf("decoding snapshot %s: district %s: %w", id, dID, err)
			}
			if n == 0 {
				if _, err := w.Write(st.prefix); err != nil {
					return err
				}
			}
			if _, err := w.Write(piece); err != nil {
				return err
			}
			n++
		}
		return nil
	}
	var cerr error
	err = v.getBatches(ctx, refs, streamBatch, func(docs []*firestore.DocumentSnapshot) error {
		cerr = consume(docs)
		return cerr
	})
	switch {
	case cerr != nil:
		return n, asRead, cerr
	case err != nil:
		return n, asRead, fmt.Errorf("reading districts of %s: %w", id, err)
	}
	end, err := st.end(n)
	if err != nil {
		return n, asRead, fmt.Errorf("decoding snapshot %s: %w", id, err)
	}
	_, err = w.Write(end)
	return n, asRead, err
}

// streamOrder is the ids of the district documents to read, in the order
// Get returns the districts: those the manifest records as written, in
// its order; for a root without such a record (layout.RecordedWritten nil) every
// stored district document, the manifest's first, then the rest by id.
func streamOrder(ctx context.Context, root *layout.Root, written map[string]bool, districts *firestore.CollectionRef) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	if written != nil {
		for _, e := range root.Manifest.Districts {
			if dID := e.DistrictID; written[dID] && !seen[dID] {
				seen[dID] = true
				ids = append(ids, dID)
			}
		}
		return ids, nil
	}
	stored := map[string]bool{}
	it := districts.DocumentRefs(ctx)
	for {
		ref, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, err
		}
		if dID, ok := strings.CutPrefix(ref.ID, layout.DistrictDocPrefix); ok {
			stored[dID] = true
		}
	}
	return layout.ManifestOrder(root, stored), nil
}

// skeleton writes a snapshot's JSON around its districts: the snapshot is
// rendered with one placeholder district, whose id no stored district can
// have, and the bytes before and after it frame the districts written in
// its place. Rendering is json.Encoder's of the *model.Snapshot: Marshal's
// canonical JSON with <, > and & escaped, and indented.
type skeleton struct {
	root        *layout.Root
	indent      bool
	placeholder string // the placeholder district's id
	prefix      []byte // up to the first district
	mark        []byte // the placeholder district as rendered
	at          string // the indentation of a district's lines
}

// districtsDepth is how deep a district's object is indented: inside the
// snapshot, its payload and the districts array.
const districtsDepth = 3

func newSkeleton(root *layout.Root, indent bool) (*skeleton, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	st := &skeleton{root: root, indent: indent, placeholder: "snapwriter-placeholder-" + hex.EncodeToString(b[:])}
	if indent {
		st.at = strings.Repeat("  ", districtsDepth)
	}
	var err error
	if st.mark, err = st.district(nil, map[string]any{"districtId": st.placeholder}, false); err != nil {
		return nil, err
	}
	// The count a root of the application's payload metadata is rebuilt
	// with is written after the districts ("metadata" follows "districts"
	// in the payload): end renders that part again with the real count.
	st.prefix, _, err = st.render(0)
	return st, err
}

// render renders the snapshot with the placeholder for n districts and
// splits it around the placeholder.
func (st *skeleton) render(n int) (before, after []byte, err error) {
	s, err := layout.RootSnapshotList(st.root, n, []any{map[string]any{"districtId": st.placeholder}})
	if err != nil {
		return nil, nil, err
	}
	out, err := encodeLikeCLI(s, st.indent)
	if err != nil {
		return nil, nil, err
	}
	i := bytes.Index(out, st.mark)
	if i < 0 || bytes.Count(out, st.mark) != 1 {
		return nil, nil, errors.New("the snapshot's JSON has no single place for its districts")
	}
	return out[:i], out[i+len(st.mark):], nil
}

// district appends one district's data as rendered inside the districts
// array, after a separator unless it is the first.
func (st *skeleton) district(dst []byte, data map[string]any, sep bool) ([]byte, error) {
	canon, err := model.Marshal(data)
	if err != nil {
		return dst, err
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, canon)
	out := bytes.NewBuffer(dst)
	if sep {
		out.WriteByte(',')
		if st.indent {
			out.WriteString("\n" + st.at)
		}
	}
	if !st.indent {
		out.Write(esc.Bytes())
		return out.Bytes(), nil
	}
	if err := json.Indent(out, esc.Bytes(), st.at, "  "); err != nil {
		return dst, err
	}
	return out.Bytes(), nil
}

// end is what follows the n districts written: the rest of the snapshot,
// or, when there were none, the whole snapshot without districts.
func (st *skeleton) end(n int) ([]byte, error) {
	if n == 0 {
		s, err := layout.RootSnapshotList(st.root, 0, []any{})
		if err != nil {
			return nil, err
		}
		return encodeLikeCLI(s, st.indent)
	}
	before, after, err := st.render(n)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(before, st.prefix) {
		return nil, errors.New("the snapshot's JSON before its districts depends on their number")
	}
	return after, nil
}

// encodeLikeCLI is json.Encoder's encoding of s, as `snapwriter get`
// printed Get's result.
func encodeLikeCLI(s *model.Snapshot, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

package snapshot

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/snapwriter/snapwriter/model"
)

// withReadBudget sets how long one read-only transaction of a Reader's
// views reads, so that a test of a few batches opens one per batch.
func withReadBudget(d time.Duration) ReaderOption {
	return func(r *Reader) { r.readBudget = d }
}

// ownerToken is the emulator's admin credential.
type ownerToken struct{}

func (ownerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}
func (ownerToken) RequireTransportSecurity() bool { return false }

// streamHook runs fn once, on the streaming call (BatchGetDocuments,
// RunQuery, ListDocuments…) that matches, before the call starts: a writer
// at work between two reads of a reader.
type streamHook struct {
	// before reports, for each streaming call in order (method and how
	// many calls of that method came before it), whether fn runs first.
	before func(method string, n int) bool
	fn     func()

	mu    sync.Mutex
	calls map[string]int
	ran   bool
}

func (h *streamHook) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	h.mu.Lock()
	n := h.calls[method]
	h.calls[method] = n + 1
	run := !h.ran && h.before(method, n)
	h.ran = h.ran || run
	h.mu.Unlock()
	if run {
		h.fn()
	}
	return streamer(ctx, desc, cc, method, opts...)
}

func (h *streamHook) fired() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ran
}

// hookedClient is a client of the env's project whose streaming calls go
// through h. (The emulator package's clients take unary interceptors only,
// and every read the Reader makes is a streaming call.)
func (e *env) hookedClient(h *streamHook) *firestore.Client {
	e.t.Helper()
	h.calls = map[string]int{}
	conn, err := grpc.NewClient(emu.Host, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(ownerToken{}), grpc.WithStreamInterceptor(h.intercept))
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := firestore.NewClient(context.Background(), e.project, option.WithGRPCConn(conn), option.WithoutAuthentication())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// batchGet is the method of document reads by name.
const batchGet = "/google.firestore.v1.Firestore/BatchGetDocuments"

// TestReadsSeeOneMoment: a write that replaces a snapshot (other data, 30
// districts fewer, their documents and manifest pages deleted) while a
// reader reads it does not show in what the reader returns: Get, WriteJSON
// and Verify return the snapshot as it was when they read its root — the
// districts, the manifest pages and the root of one write — though the
// write lands between their read of the root and their next read.
// WriteJSON does so across several read-only transactions (one per batch
// here), the rewrite landing between two batches.
func TestReadsSeeOneMoment(t *testing.T) {
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		// Every read after the first, the root's.
		afterRoot := func(method string, n int) bool { return method != batchGet || n > 0 }
		ops := []struct {
			name   string
			before func(method string, n int) bool
			read   func(t *testing.T, r *Reader, date string, first *model.Snapshot)
		}{
			{"Get", afterRoot, func(t *testing.T, r *Reader, date string, first *model.Snapshot) {
				got, err := r.Get(ctx, date)
				if err != nil {
					t.Fatal(err)
				}
				if !model.Equal(got, first) {
					t.Errorf("Get returned a snapshot no write stored: %s", model.Diff(got, first))
				}
			}},
			// Before the second batch of districts (the root is the
			// first BatchGetDocuments).
			{"WriteJSON", func(method string, n int) bool { return method == batchGet && n == 2 },
				func(t *testing.T, r *Reader, date string, first *model.Snapshot) {
					want, _ := getOutput(t, NewReader(e.clean, ""), date, true)
					var got bytes.Buffer
					if _, _, err := r.WriteJSON(ctx, &got, date, true); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got.Bytes(), want) {
						back, err := model.Decode(bytes.NewReader(got.Bytes()))
						if err != nil {
							t.Fatalf("WriteJSON wrote what model.Decode refuses: %v", err)
						}
						t.Errorf("WriteJSON wrote a snapshot no write stored: %s", model.Diff(back, first))
					}
				}},
			{"Verify", afterRoot, func(t *testing.T, r *Reader, date string, first *model.Snapshot) {
				rep, err := r.Verify(ctx, date, first)
				if err != nil {
					t.Fatal(err)
				}
				if !rep.Intact || !rep.Complete || rep.Documents != len(first.Payload.Districts) {
					t.Errorf("Verify: intact %v, complete %v, %d documents, problems %v; want the intact complete snapshot of %d",
						rep.Intact, rep.Complete, rep.Documents, rep.Problems, len(first.Payload.Districts))
				}
			}},
		}
		for i, op := range ops {
			t.Run(op.name, func(t *testing.T) {
				date := []string{"2026-11-20", "2026-11-21", "2026-11-22"}[i]
				first, next := model.Generate(date, 120, 1), model.Generate(date, 90, 2)
				mustWrite(t, e.writer(), date, first)
				h := &streamHook{before: op.before, fn: func() { mustWrite(t, e.writer(), date, next) }}
				op.read(t, NewReader(e.hookedClient(h), "", withReadBudget(0)), date, first)
				if !h.fired() {
					t.Fatal("the rewrite never ran: the test proves nothing")
				}
				// The rewrite landed: a read now returns it.
				if got := e.get(date); !model.Equal(got, next) {
					t.Errorf("after the rewrite, Get: %s", model.Diff(got, next))
				}
			})
		}
	})
}

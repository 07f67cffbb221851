//go:build chaos

package chaos

import (
	"context"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
)

// gateSnapshot is the size of the gate's scenarios: a few batches of the
// gate's comparison.
const gateSnapshot = 300

// exitHeld is the CLI's exit code for a snapshot the gate held.
const exitHeld = 8

// gateRead matches the client-to-server bytes of the gate's first read
// of stored district documents: a gRPC message that is a
// BatchGetDocumentsRequest naming district documents. Before a gated
// write's root nothing else reads them so (the root transaction reads
// the root and the fence document; the stale listing is a query).
func gateRead(data []byte) bool {
	var req firestorepb.BatchGetDocumentsRequest
	if !grpcMessage(data, &req) || len(req.GetDocuments()) == 0 {
		return false
	}
	return strings.Contains(req.GetDocuments()[0], "/districts/district_")
}

// gateSetup stores day complete (seed 1) straight at the emulator and
// returns a rewrite of it with other values (seed 2) and the stored state
// with the root's update time, to compare with after the fault.
func gateSetup(s *scenario) (*input, stored, time.Time) {
	s.t.Helper()
	first := generated(s.t, day, gateSnapshot, 1)
	if w := s.run("write", s.direct(), "write", "--input", first.path); w.wait() != 0 {
		s.t.Fatalf("the first write: exit %s\n%s", w.outcome(), w.describe())
	}
	return generated(s.t, day, gateSnapshot, 2), s.read(), s.rootUpdated()
}

// rootUpdated is when the root document was last written.
func (s *scenario) rootUpdated() time.Time {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doc, err := s.client.Collection("snapshots").Doc(day).Get(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return doc.UpdateTime
}

// checkUntouched checks that the snapshot is stored as it was before: the
// same root, written at the same moment, and the same district documents,
// each written at the same moment.
func (s *scenario) checkUntouched(before stored, rootAt time.Time) {
	s.t.Helper()
	if after := s.read(); !reflect.DeepEqual(after, before) {
		s.t.Errorf("the stored snapshot changed:\nbefore %s\nafter  %s", before, after)
	}
	if at := s.rootUpdated(); !at.Equal(rootAt) {
		s.t.Errorf("the root was written again at %v (last written %v before)", at, rootAt)
	}
}

// Scenario 14a: a gated rewrite whose comparison gets no answer (its read
// of the stored districts held up by the network): it holds by the
// compare rule within its --request-timeout — exit 8, nothing written, the lock
// released. The operator's next steps: the rerun holds by the value rule,
// and with --allow-value-changes it writes the input.
func TestGateReadUnanswered(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "14a. a gated rewrite's comparison read unanswered; then held by value; then allowed")
	in, before, rootAt := gateSetup(s)
	held := s.proxy.HoldUp(gateRead)
	w := s.start(procSpec{name: "gated write", host: s.viaProxy(), limit: writeLimit,
		args: []string{"write", "--input", in.path, "--gate", "--request-timeout", "5s"}})
	s.exited(w, exitHeld)
	select {
	case <-held:
	default:
		t.Fatalf("the gate's read was never held up\n%s", w.describe())
	}
	if e, ok := w.find(message("publication held by the gate: nothing written; `snapwriter diff` shows what differs")); !ok || !strings.Contains(e.Raw, `"rules":["compare"]`) {
		t.Errorf("no ERROR line holding by the compare rule\n%s", w.describe())
	}
	s.proxy.ResetAll()
	s.checkUntouched(before, rootAt)
	s.checkNoLocks()

	again := s.run("gated rerun", s.viaProxy(), "write", "--input", in.path, "--gate")
	s.exited(again, exitHeld)
	if !strings.Contains(again.stdoutString(), "held: value:") {
		t.Errorf("the rerun did not hold by the value rule:\n%s", again.stdoutString())
	}
	s.checkUntouched(before, rootAt)
	allowed := s.start(procSpec{name: "allowed", host: s.viaProxy(), limit: writeLimit,
		args: []string{"write", "--input", in.path, "--gate", "--allow-value-changes"}})
	s.exited(allowed, 0)
	s.checkFinal(in, manifestOpts{})
}

// Scenario 14b: a gated rewrite SIGKILLed during its comparison (its read
// of the stored districts held, then the kill): nothing is written; once
// its lock expires the rerun, allowed, writes the input whole.
func TestGateSIGKILL(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "14b. SIGKILL during the gate's comparison, then the rerun allowed")
	in, before, rootAt := gateSetup(s)
	held := s.proxy.HoldUp(gateRead)
	w := s.start(procSpec{name: "gated write", host: s.viaProxy(), limit: writeLimit,
		args: []string{"write", "--input", in.path, "--gate", "--lock-ttl", shortTTL.String()}})
	select {
	case <-held:
		w.signal(syscall.SIGKILL)
	case <-w.done:
	}
	s.killed(w, "the gate's read was held")
	killedAt := w.signalledAt(syscall.SIGKILL)
	s.proxy.ResetAll()
	s.checkUntouched(before, rootAt)
	r := s.start(procSpec{name: "rerun", host: s.viaProxy(), limit: writeLimit,
		args: []string{"write", "--input", in.path, "--gate", "--allow-value-changes"}})
	if s.exited(r, 0) {
		s.recovered(r.endedAt().Sub(killedAt))
	}
	s.checkFinal(in, manifestOpts{})
}

package snapshot

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/gate"
)

// BatchResult is one chunk's outcome. Batch 0 is the root document.
type BatchResult struct {
	BatchIndex     int  `json:"batchIndex"`
	OperationCount int  `json:"operationCount"`
	Success        bool `json:"success"`
	RetryAttempts  int  `json:"retryAttempts"`
	// AbortedRetries counts the retries that followed an ABORTED answer
	// (contention: another transaction held a document this one needed).
	AbortedRetries int      `json:"abortedRetries"`
	DurationMs     int64    `json:"durationMs"`
	DistrictIDs    []string `json:"districtIds"`
	// CommittedAt is when the chunk's commit succeeded, zero if it did
	// not (loadtest measures write rates from it). Not in the JSON.
	CommittedAt time.Time `json:"-"`
	// Err is why the chunk failed (nil on success): match it with
	// errors.Is, e.g. against ErrFencedOut or context.Canceled, or a gRPC
	// status with status.Code. JSON renders it as its message, "error".
	Err     error `json:"-"`
	deletes int
	// unsure: a commit of this chunk may have been applied although no
	// attempt was seen to succeed; the finish reads its documents to decide.
	unsure bool
	// notAttempted: the chunk never started (the write was stopped or
	// its lease lost first).
	notAttempted bool
	ops          []op
	budgetWait   time.Duration // its attempts' waits for the write budget
}

// MarshalJSON renders Err as "error", its message, in the field order of
// the other results.
func (r BatchResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		BatchIndex     int      `json:"batchIndex"`
		OperationCount int      `json:"operationCount"`
		Success        bool     `json:"success"`
		RetryAttempts  int      `json:"retryAttempts"`
		AbortedRetries int      `json:"abortedRetries"`
		DurationMs     int64    `json:"durationMs"`
		Error          string   `json:"error,omitempty"`
		DistrictIDs    []string `json:"districtIds"`
	}{r.BatchIndex, r.OperationCount, r.Success, r.RetryAttempts, r.AbortedRetries, r.DurationMs, errText(r.Err), r.DistrictIDs})
}

// Result is what a write or repair did: how it ended, its chunks, the
// districts written and not, and the fence it wrote under.
type Result struct {
	SnapshotID string `json:"snapshotId"`
	// Outcome is how the write or repair ended: what is stored, and
	// whether the root's manifest says so.
	Outcome           Outcome       `json:"outcome"`
	TotalBatches      int           `json:"totalBatches"` // the root's transaction (batch 0) and the chunks
	SuccessfulBatches int           `json:"successfulBatches"`
	FailedBatches     int           `json:"failedBatches"`
	Chunks            int           `json:"chunks"` // the district chunks alone; Root reports batch 0
	SuccessfulChunks  int           `json:"successfulChunks"`
	FailedChunks      int           `json:"failedChunks"`
	DistrictsWritten  int           `json:"districtsWritten"`
	FailedDistricts   []string      `json:"failedDistricts"`
	StaleDeleted      int           `json:"staleDistrictsDeleted"`
	TotalDurationMs   int64         `json:"totalDurationMs"`
	Fence             string        `json:"fence"`
	BatchResults      []BatchResult `json:"batchResults"`
	// DistrictsKept counts the districts a repair, or a write resuming an
	// unfinished write of the same input, found stored intact and recorded
	// without writing them again.
	DistrictsKept int `json:"districtsKept,omitempty"`
	// RootCommits counts the commits of this write that wrote the root
	// document — the root transaction, the progress records and the
	// finish: Firestore serialises commits to one document and rewrites
	// it whole, so this is what a write costs its hottest document. It
	// stays within the write's seconds + 5.
	RootCommits int `json:"rootCommits"`
	// LockWaitMs is how long acquiring the snapshot's lock took.
	LockWaitMs int64 `json:"lockWaitMs"`
	// LockRenewals is how the lock's renewals went during the write, and
	// whether it ran fewer chunks at once to keep them fast (shedding).
	LockRenewals LockRenewals `json:"lockRenewals"`
	// WriteRate is how the write paced its chunks (WithWriteBudget) and
	// how often the store pushed back.
	WriteRate WriteRate `json:"writeRate"`
	// Gate is the publication gate's report (WithGate): what it compared
	// the input with, and why it held it or let it through; nil when the
	// gate was off or did not run (a repair, a skipped write).
	Gate *gate.Report `json:"gate,omitempty"`
}

// firstFailure says which chunk failed first, and why: its error names
// what did not answer in time (its commit, within the retry policy's
// attempt timeout) or what refused it.
func firstFailure(res *Result) string {
	for _, b := range res.BatchResults {
		if !b.Success && b.Err != nil {
			return fmt.Sprintf("the first, chunk %d: %v", b.BatchIndex, b.Err)
		}
	}
	return "chunks whose outcome could not be confirmed"
}

// summarize completes res — counts (from the written set s, nil when no
// chunk ran), duration, root commits, the lock's renewals — and logs it.
func (j *job) summarize(res *Result, s *written) {
	s.tally(res)
	res.TotalDurationMs = j.w.cfg.now().Sub(j.in.StartedAt).Milliseconds()
	res.RootCommits, res.LockWaitMs = int(j.rootCommits.Load()), j.lockWait.Milliseconds()
	res.LockRenewals, res.WriteRate = admitted(j.adm)
	lvl := zap.InfoLevel
	if !res.Complete() {
		lvl = zap.WarnLevel
	}
	j.log.Log(lvl, "snapshot write finished",
		zap.Bool("complete", res.Complete()),
		zap.Int("totalBatches", res.TotalBatches),
		zap.Int("successfulBatches", res.SuccessfulBatches),
		zap.Int("failedBatches", res.FailedBatches),
		zap.Int("districtsWritten", res.DistrictsWritten),
		// A count and a sample: 20,000 ids would make a line of 150 KB and more.
		// The Result (and --json) has them all.
		zap.Int("failedDistricts", len(res.FailedDistricts)),
		zap.Strings("failedDistrictsSample", sample(res.FailedDistricts)),
		zap.Int("staleDistrictsDeleted", res.StaleDeleted),
		zap.Int("rootCommits", res.RootCommits),
		zap.Int64("lockWaitMs", res.LockWaitMs),
		zap.Int("lockRenewals", res.LockRenewals.Count),
		zap.Int64("slowestLockRenewalMs", res.LockRenewals.SlowestMs),
		zap.Int("concurrencySheds", res.LockRenewals.Sheds),
		zap.Int("minConcurrency", res.LockRenewals.MinConcurrency),
		zap.Int("renewalPauses", res.LockRenewals.Pauses),
		zap.Float64("writeRateLimit", res.WriteRate.LimitPerSec),
		zap.Int64("writeRateWaitedMs", res.WriteRate.WaitedMs),
		zap.Int("resourceExhausted", res.WriteRate.ResourceExhausted),
		zap.Int("abortedCommits", res.WriteRate.Aborted),
		zap.Int64("totalDurationMs", res.TotalDurationMs))
}

// logSample is how many of a list's ids a log line names, beside the
// count of them all.
const logSample = 10

// sample is the first logSample ids of list, for a log line.
func sample(list []string) []string { return list[:min(len(list), logSample)] }

func logBatch(log *zap.Logger, r BatchResult) {
	fields := []zap.Field{
		zap.Int("batchIndex", r.BatchIndex),
		zap.Int("operationCount", r.OperationCount),
		zap.Bool("success", r.Success),
		zap.Int("retryAttempts", r.RetryAttempts),
		zap.Int64("durationMs", r.DurationMs),
		zap.Int("districts", len(r.DistrictIDs)),
	}
	if r.Err != nil {
		log.Warn("batch failed", append(fields, zap.String("error", r.Err.Error()))...)
		return
	}
	log.Info("batch committed", fields...)
}

// Outcome says how a write or repair ended: what is stored now, and
// whether the root's manifest says so. Its error, when it has one, says
// why (the Err… sentinels it matches).
type Outcome int

const (
	// OutcomeComplete: every district is stored and the manifest records
	// it. The error is nil.
	OutcomeComplete Outcome = iota + 1
	// OutcomeSkipped: the stored snapshot was complete already
	// (WithSkipComplete, or a Repair with nothing to repair): nothing was
	// written. The error is nil.
	OutcomeSkipped
	// OutcomePartial: the manifest records which districts were not
	// written (FailedDistricts): chunks failed, the write was stopped, or
	// the lease was lost (ErrPartial). Repair completes the snapshot.
	OutcomePartial
	// OutcomeNotRecorded: the write's outcome could not be recorded
	// (ErrManifestNotRecorded): the root still describes a write in
	// progress, and the Result's lists are this process's own account.
	// Repair (or writing the snapshot again) completes it.
	OutcomeNotRecorded
	// OutcomeFencedOut: a writer with a newer fence took the snapshot
	// over (ErrFencedOut), before this one's root or after it; what this
	// writer had not committed was refused, and its outcome is not
	// recorded.
	OutcomeFencedOut
	// OutcomeNotWritten: no district was attempted. The root document
	// could not be written (ErrRootFailed), the stored snapshot was not
	// this writer's to replace (ErrLockBackendSwitch, ErrLockKeySwitch,
	// ErrLockHeld, ErrMismatch), or the lease was lost first (ErrLockLost;
	// see ErrNothingWritten).
	OutcomeNotWritten
	// OutcomeHeld: the publication gate (WithGate) held the snapshot
	// (ErrHeld); nothing was written, and Gate says why.
	OutcomeHeld
)

var outcomeNames = map[Outcome]string{
	OutcomeComplete: "complete", OutcomeSkipped: "skipped", OutcomePartial: "partial",
	OutcomeNotRecorded: "notRecorded", OutcomeFencedOut: "fencedOut", OutcomeNotWritten: "notWritten",
	OutcomeHeld: "held",
}

// String returns the outcome's name in the Result's JSON: "complete",
// "skipped", "partial", "notRecorded", "fencedOut", "notWritten", "held".
func (o Outcome) String() string {
	if n, ok := outcomeNames[o]; ok {
		return n
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText renders o by its name ("" for no outcome).
func (o Outcome) MarshalText() ([]byte, error) {
	if o == 0 {
		return []byte{}, nil
	}
	if _, ok := outcomeNames[o]; !ok {
		return nil, fmt.Errorf("snapshot: unknown outcome %d", int(o))
	}
	return []byte(o.String()), nil
}

// UnmarshalText reads an outcome by its name.
func (o *Outcome) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*o = 0
		return nil
	}
	for k, n := range outcomeNames {
		if n == string(b) {
			*o = k
			return nil
		}
	}
	return fmt.Errorf("snapshot: unknown outcome %q", b)
}

// ManifestRecorded reports whether the root's manifest records r's
// outcome (or, for a skipped write, already recorded a complete one): the
// JSON's "manifestRecorded".
func (r *Result) ManifestRecorded() bool {
	return r.Outcome == OutcomeComplete || r.Outcome == OutcomeSkipped || r.Outcome == OutcomePartial
}

// Complete is the JSON's "complete": true for a complete or skipped
// write, false for a partial one, and for an outcome that is not
// recorded, whether every chunk this process ran committed (as it counted
// them, and so false when it ran none, the root's included).
func (r *Result) Complete() bool {
	switch r.Outcome {
	case OutcomeComplete, OutcomeSkipped:
		return true
	case OutcomePartial:
		return false
	}
	return r.TotalBatches > 0 && r.FailedBatches == 0
}

// resultJSON is Result's JSON beyond its fields: the booleans Outcome
// replaced, which the CLI's --json has always printed.
type resultJSON struct {
	Complete         bool `json:"complete"`
	Skipped          bool `json:"skipped,omitempty"`
	ManifestRecorded bool `json:"manifestRecorded"`
	LockLost         bool `json:"lockLost,omitempty"`
}

// MarshalJSON renders r with its Outcome ("outcome") and the booleans it
// replaced: "complete" (see Outcome), "skipped", "manifestRecorded" (the
// root's manifest records the outcome) and "lockLost" (LockRenewals.Lost).
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		SnapshotID string  `json:"snapshotId"`
		Outcome    Outcome `json:"outcome"`
		Complete   bool    `json:"complete"`
		Skipped    bool    `json:"skipped,omitempty"`
		plain
		ManifestRecorded bool `json:"manifestRecorded"`
		LockLost         bool `json:"lockLost,omitempty"`
	}{r.SnapshotID, r.Outcome, r.Complete(), r.Outcome == OutcomeSkipped, plain(r), r.ManifestRecorded(), r.LockRenewals.Lost})
}

// UnmarshalJSON reads what MarshalJSON writes, and the JSON of earlier
// versions, which had no "outcome": it is read from their booleans.
func (r *Result) UnmarshalJSON(b []byte) error {
	type plain Result
	var v struct {
		plain
		resultJSON
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Result(v.plain)
	r.LockRenewals.Lost = v.LockLost
	if r.Outcome == 0 {
		switch {
		case v.Skipped:
			r.Outcome = OutcomeSkipped
		case v.ManifestRecorded && v.Complete:
			r.Outcome = OutcomeComplete
		case v.ManifestRecorded:
			r.Outcome = OutcomePartial
		default:
			r.Outcome = OutcomeNotRecorded
		}
	}
	return nil
}

// Root is the result of the write's root transaction (batch 0 of
// BatchResults, which commits the root document before any district);
// ok is false when it never ran (a skipped write, or one stopped before
// it).
func (r *Result) Root() (root BatchResult, ok bool) {
	if len(r.BatchResults) == 0 || r.BatchResults[0].BatchIndex != 0 {
		return BatchResult{}, false
	}
	return r.BatchResults[0], true
}

// errText is err's message, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

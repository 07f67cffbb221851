package snapshot

import (
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"
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
	// Err is why the chunk failed (nil on success): match it with
	// errors.Is, e.g. against ErrFencedOut or context.Canceled, or a gRPC
	// status with status.Code. JSON renders it as its message, "error".
	Err     error `json:"-"`
	deletes int
	// unsure: a commit of this chunk may have been applied although no
	// attempt was seen to succeed; the finish reads its documents to decide.
	unsure    bool
	ops       []op
	committed time.Time // when the chunk's commit succeeded
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

// Result is what a write or repair did: its chunks, the districts written
// and not, and the fence it wrote under.
type Result struct {
	SnapshotID string `json:"snapshotId"`
	Complete   bool   `json:"complete"`
	// Skipped: WithSkipComplete found the stored snapshot complete, or
	// Repair found nothing to repair; nothing was written.
	Skipped           bool          `json:"skipped,omitempty"`
	TotalBatches      int           `json:"totalBatches"`
	SuccessfulBatches int           `json:"successfulBatches"`
	FailedBatches     int           `json:"failedBatches"`
	DistrictsWritten  int           `json:"districtsWritten"`
	FailedDistricts   []string      `json:"failedDistricts"`
	StaleDeleted      int           `json:"staleDistrictsDeleted"`
	TotalDurationMs   int64         `json:"totalDurationMs"`
	Fence             string        `json:"fence"`
	BatchResults      []BatchResult `json:"batchResults"`
	// ManifestRecorded: the root document records this outcome (or, for a
	// skipped write, already recorded a complete one). When false, the
	// root still describes a write in progress and the lists above are
	// this process's own account; Repair completes the snapshot.
	ManifestRecorded bool `json:"manifestRecorded"`
	// LockLost: the lease ended mid-write, without a newer writer.
	LockLost bool `json:"lockLost,omitempty"`
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

// tally fills the aggregate counts from the batch results (property 7).
func (w *Writer) tally(res *Result) {
	res.TotalBatches = len(res.BatchResults)
	res.SuccessfulBatches, res.FailedBatches, res.DistrictsWritten, res.StaleDeleted = 0, 0, 0, 0
	res.FailedDistricts = []string{}
	for _, r := range res.BatchResults {
		if r.Success {
			res.SuccessfulBatches++
			res.DistrictsWritten += len(r.DistrictIDs)
			res.StaleDeleted += r.deletes
		} else {
			res.FailedBatches++
			res.FailedDistricts = append(res.FailedDistricts, r.DistrictIDs...)
		}
	}
	res.Complete = res.FailedBatches == 0
}

// summarize completes the job's Result — counts, duration, root commits,
// the lock's renewals — and logs it.
func (j *job) summarize() {
	res := j.res
	if res.TotalBatches == 0 {
		j.w.tally(res)
	}
	res.TotalDurationMs = j.w.cfg.now().Sub(j.in.startedAt).Milliseconds()
	res.RootCommits, res.LockWaitMs = int(j.rootCommits.Load()), j.lockWait.Milliseconds()
	if j.shed != nil {
		res.LockRenewals = j.shed.summary()
	}
	lvl := zap.InfoLevel
	if !res.Complete {
		lvl = zap.WarnLevel
	}
	j.log.Log(lvl, "snapshot write finished",
		zap.Bool("complete", res.Complete),
		zap.Int("totalBatches", res.TotalBatches),
		zap.Int("successfulBatches", res.SuccessfulBatches),
		zap.Int("failedBatches", res.FailedBatches),
		zap.Int("districtsWritten", res.DistrictsWritten),
		zap.Strings("failedDistricts", res.FailedDistricts),
		zap.Int("staleDistrictsDeleted", res.StaleDeleted),
		zap.Int("rootCommits", res.RootCommits),
		zap.Int64("lockWaitMs", res.LockWaitMs),
		zap.Int("lockRenewals", res.LockRenewals.Count),
		zap.Int64("slowestLockRenewalMs", res.LockRenewals.SlowestMs),
		zap.Int("concurrencySheds", res.LockRenewals.Sheds),
		zap.Int("minConcurrency", res.LockRenewals.MinConcurrency),
		zap.Int("renewalPauses", res.LockRenewals.Pauses),
		zap.Int64("totalDurationMs", res.TotalDurationMs))
}

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

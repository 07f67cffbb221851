package snapshot

import (
	"errors"
	"maps"
	"time"
)

// written is the written set of a write or repair: how each district of
// its chunks ended. It is the one account of what the chunks did. The
// chunks add to it as they end (through the recorder, which keeps it
// while they run); the progress records put in the root its written
// districts and those whose chunk failed for good, so that while the root
// says "writing", "not written yet" means not reached yet (pending); the
// finish decides in it the chunks whose commit outcome is unknown and
// records it whole in the manifest; and the Result's district counts are
// read from it (tally).
type written struct {
	ends   map[string]districtEnd
	fenced bool // a chunk was refused for a newer fence
	// decided: the finish decided chunks of unknown outcome; their
	// entries, and all others, are then stamped with the finish's time
	// (state).
	decided bool
}

// districtEnd is how the chunk of one district ended.
type districtEnd struct {
	ok bool
	// at: when its chunk committed (isoMillis), when ok; when it failed,
	// when failed for good.
	at  string
	msg string // why it was not written, when not ok
	// open: not written, but not failed for good either: its chunk's
	// commit outcome is unknown (the finish decides it from the
	// documents), or its chunk was never attempted (the write was stopped
	// or its lease lost first). The progress records leave it pending.
	open bool
}

func newWritten() *written { return &written{ends: map[string]districtEnd{}} }

// settled reports whether chunk r's districts are written or failed for
// good: news for the root's progress records, which record both.
func settled(r BatchResult) bool { return r.Success || !r.unsure && !r.notAttempted }

// endOf is how chunk r ended for each of its districts.
func endOf(r BatchResult) districtEnd {
	switch {
	case r.Success:
		return districtEnd{ok: true, at: isoMillis(r.CommittedAt)}
	case !settled(r):
		return districtEnd{msg: errText(r.Err), open: true}
	}
	return districtEnd{msg: errText(r.Err), at: isoMillis(time.Now())}
}

// add notes how chunk r ended for each of its districts.
func (s *written) add(r BatchResult) {
	end := endOf(r)
	if !r.Success {
		s.fenced = s.fenced || errors.Is(r.Err, ErrFencedOut)
	}
	for _, d := range r.DistrictIDs {
		s.ends[d] = end
	}
}

// progress is the root's state while the write goes on: the districts
// written so far recorded as written, when their chunks committed, and
// those whose chunks failed for good as failed, with their error, when
// they failed. Every other district stays not written yet: not reached,
// or its chunk in flight, never attempted, or of unknown outcome.
func (s *written) progress() rootState {
	st := rootState{status: statusPartial, writing: true, entries: map[string]string{}, times: map[string]string{},
		msgs: map[string]string{}}
	for id, e := range s.ends {
		switch {
		case e.ok:
			st.entries[id], st.times[id] = entrySuccess, e.at
		case !e.open:
			st.entries[id], st.times[id], st.msgs[id] = entryFailed, e.at, e.msg
		}
	}
	return st
}

// finished is the root's state that records the set: status, a manifest
// entry for every district of the chunks, finished at now.
func (s *written) finished(status string, complete bool, now time.Time) rootState {
	st := rootState{status: status, complete: complete, entries: make(map[string]string, len(s.ends)),
		msgs: make(map[string]string, len(s.ends)), modified: now, finishedAt: now}
	if !s.decided {
		st.times = map[string]string{}
	}
	for id, e := range s.ends {
		st.entries[id], st.msgs[id] = entryFailed, e.msg
		if e.ok {
			st.entries[id] = entrySuccess
			if st.times != nil {
				st.times[id] = e.at
			}
		}
	}
	return st
}

// clone is a copy of s that the finish's transaction decides in (it may
// run again).
func (s *written) clone() *written {
	c := *s
	c.ends = maps.Clone(s.ends)
	return &c
}

// tally fills res's counts: the batches and chunks from its batch
// results (batch 0 is the root's transaction, the others the chunks), and
// the districts from the written set s (nil when no chunk ran), in chunk
// order.
func (s *written) tally(res *Result) {
	res.TotalBatches = len(res.BatchResults)
	res.SuccessfulBatches, res.FailedBatches, res.StaleDeleted = 0, 0, 0
	res.Chunks, res.SuccessfulChunks, res.FailedChunks = 0, 0, 0
	res.DistrictsWritten, res.FailedDistricts = 0, []string{}
	for _, b := range res.BatchResults {
		if b.Success {
			res.SuccessfulBatches++
			res.StaleDeleted += b.deletes
		} else {
			res.FailedBatches++
		}
		if b.BatchIndex != 0 {
			res.Chunks++
			if b.Success {
				res.SuccessfulChunks++
			} else {
				res.FailedChunks++
			}
		}
		if s == nil {
			continue
		}
		for _, d := range b.DistrictIDs {
			if s.ends[d].ok {
				res.DistrictsWritten++
			} else {
				res.FailedDistricts = append(res.FailedDistricts, d)
			}
		}
	}
}

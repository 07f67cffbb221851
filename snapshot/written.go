package snapshot

import (
	"errors"
	"maps"
	"time"

	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
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
	// at: when its chunk committed (layout.IsoMillis), when ok; when it failed,
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
		return districtEnd{ok: true, at: layout.IsoMillis(r.CommittedAt)}
	case !settled(r):
		return districtEnd{msg: errText(r.Err), open: true}
	}
	return districtEnd{msg: errText(r.Err), at: layout.IsoMillis(time.Now())}
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
func (s *written) progress() layout.State {
	st := layout.State{Status: layout.StatusPartial, Writing: true, Entries: map[string]string{}, Times: map[string]string{},
		Msgs: map[string]string{}}
	for id, e := range s.ends {
		switch {
		case e.ok:
			st.Entries[id], st.Times[id] = layout.EntrySuccess, e.at
		case !e.open:
			st.Entries[id], st.Times[id], st.Msgs[id] = layout.EntryFailed, e.at, e.msg
		}
	}
	return st
}

// finished is the root's state that records the set: status, a manifest
// entry for every district of the chunks, finished at now.
func (s *written) finished(status string, complete bool, now time.Time) layout.State {
	st := layout.State{Status: status, Complete: complete, Entries: make(map[string]string, len(s.ends)),
		Msgs: make(map[string]string, len(s.ends)), Modified: now, FinishedAt: now}
	if !s.decided {
		st.Times = map[string]string{}
	}
	for id, e := range s.ends {
		st.Entries[id], st.Msgs[id] = layout.EntryFailed, e.msg
		if e.ok {
			st.Entries[id] = layout.EntrySuccess
			if st.Times != nil {
				st.Times[id] = e.at
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

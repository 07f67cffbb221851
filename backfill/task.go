package backfill

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/snapwriter/snapwriter/model"
)

// Cloud Run job variables that say which task of how many a process is.
const (
	TaskIndexEnv = "CLOUD_RUN_TASK_INDEX"
	TaskCountEnv = "CLOUD_RUN_TASK_COUNT"
)

// ErrShard is matched (errors.Is) by TaskShard's error for an index and a
// count that make no shard.
var ErrShard = errors.New("want 0 <= index < count")

// EnvError is TaskShard's error for a Cloud Run variable that is not a
// non-negative integer.
type EnvError struct {
	Name, Value string
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("%s=%q: want a non-negative integer", e.Name, e.Value)
}

// TaskShard is the shard of the dates this task writes. index and count
// are the caller's own (its flags), negative when not given; either one
// not given is read from Cloud Run's TaskIndexEnv or TaskCountEnv through
// lookupEnv, and is otherwise 0 (index) or 1 (count): one task, all dates.
func TaskShard(index, count int, lookupEnv func(string) (string, bool)) (Shard, error) {
	read := func(v int, env string, def int) (int, error) {
		if v >= 0 {
			return v, nil
		}
		s, ok := lookupEnv(env)
		if !ok || s == "" {
			return def, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, &EnvError{Name: env, Value: s}
		}
		return n, nil
	}
	index, err := read(index, TaskIndexEnv, 0)
	if err == nil {
		count, err = read(count, TaskCountEnv, 1)
	}
	if err != nil {
		return Shard{}, err
	}
	if count < 1 || index >= count {
		return Shard{}, fmt.Errorf("task %d of %d: %w", index, count, ErrShard)
	}
	return Shard{Index: index, Count: count}, nil
}

// CheckRange refuses the dates from..to that Select takes ("" leaves that
// end open) with a *RangeError unless each end given is a real date and
// from is not after to.
func CheckRange(from, to string) error {
	for _, end := range []struct{ name, date string }{{"from", from}, {"to", to}} {
		if end.date != "" && !model.ValidDate(end.date) {
			return &RangeError{From: from, To: to, End: end.name, Date: end.date}
		}
	}
	if from != "" && to != "" && from > to {
		return &RangeError{From: from, To: to}
	}
	return nil
}

// RangeError is CheckRange's error.
type RangeError struct {
	From, To string
	// End is the end that is no real date, "from" or "to", and Date what
	// was given for it; End is "" when both are dates and From is after
	// To.
	End, Date string
}

func (e *RangeError) Error() string {
	if e.End != "" {
		return fmt.Sprintf("%s %q: want a real YYYY-MM-DD date", e.End, e.Date)
	}
	return fmt.Sprintf("from %s is after to %s", e.From, e.To)
}

// ResolveDate is the date end names: a YYYY-MM-DD date as it is, "today"
// (now's date), or "today-N" (N days before it), so that a scheduled
// job's window moves by itself. Anything else is returned as it is, for
// CheckRange to refuse.
func ResolveDate(end string, now time.Time) string {
	if end == "today" {
		return now.Format(time.DateOnly)
	}
	rest, ok := strings.CutPrefix(end, "today-")
	if !ok {
		return end
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || n > 100000 || strconv.Itoa(n) != rest {
		return end
	}
	return now.AddDate(0, 0, -n).Format(time.DateOnly)
}

package backfill

import (
	"errors"
	"fmt"
	"strconv"
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

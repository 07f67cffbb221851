package logging

import "go.uber.org/zap"

// CloudRunKey is the key of the object CloudRun adds to every log line.
const CloudRunKey = "cloudRun"

// CloudRun is the field that names the Cloud Run job task a process runs
// as — {"cloudRun": {"job", "execution", "taskIndex", "taskAttempt"}}, from
// CLOUD_RUN_JOB, CLOUD_RUN_EXECUTION, CLOUD_RUN_TASK_INDEX and
// CLOUD_RUN_TASK_ATTEMPT as lookupEnv finds them — for a logger's With, so
// that every line of a task says which execution, task and retry it
// came from, also once read away from Cloud Logging (which labels a job's
// entries with the same, as run.googleapis.com/execution_name, task_index
// and task_attempt). Only the variables set are included; the values are
// logged as set, strings, as Cloud Run's labels are. ok is false when none
// is set: not on Cloud Run, no field.
func CloudRun(lookupEnv func(string) (string, bool)) (f zap.Field, ok bool) {
	// The environment Cloud Run sets in a job's task, and the keys of the
	// cloudRun object, in the order they are logged.
	env := [...]struct{ env, key string }{
		{"CLOUD_RUN_JOB", "job"},
		{"CLOUD_RUN_EXECUTION", "execution"},
		{"CLOUD_RUN_TASK_INDEX", "taskIndex"},
		{"CLOUD_RUN_TASK_ATTEMPT", "taskAttempt"},
	}
	var fields []zap.Field
	for _, e := range env {
		if v, set := lookupEnv(e.env); set && v != "" {
			fields = append(fields, zap.String(e.key, v))
		}
	}
	if len(fields) == 0 {
		return zap.Skip(), false
	}
	return zap.Dict(CloudRunKey, fields...), true
}

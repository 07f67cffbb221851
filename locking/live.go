package locking

import "time"

// TimeTolerance is the slack the liveness predicate allows for clock skew
// between clients (or a client and the server). It is not configurable:
// every backend and every client must agree on what "live" means.
const TimeTolerance = time.Second

// IsLive is the one liveness predicate every backend decides by: a lock
// expiring at expiresAtMs is still held at nowMs, both Unix milliseconds,
// until TimeTolerance after its expiry, i.e. while
// expiresAtMs > nowMs − 1000.
func IsLive(expiresAtMs, nowMs int64) bool {
	return expiresAtMs > nowMs-TimeTolerance.Milliseconds()
}

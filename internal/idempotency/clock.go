package idempotency

import "time"

// Clock tells the time. Tests inject one they can move, to expire records and
// locks without sleeping.
type Clock interface {
	Now() time.Time
}

// systemClock is the wall clock, in UTC, truncated to microseconds so that
// a time survives a round trip through PostgreSQL unchanged.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

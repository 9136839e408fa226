package idempotency

import "time"

// Clock tells the time. Tests inject one they can move, to expire records and
// locks without sleeping.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock, in UTC.
type SystemClock struct{}

// Now returns the current UTC time, truncated to microseconds so that it
// survives a round trip through PostgreSQL unchanged.
func (SystemClock) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

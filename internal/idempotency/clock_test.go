package idempotency_test

import (
	"time"

	"github.com/idemkeys/payments/internal/testclock"
)

func newFakeClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

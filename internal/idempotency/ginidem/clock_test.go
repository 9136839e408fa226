package ginidem_test

import (
	"time"

	"github.com/idemkeys/payments/internal/testkit"
)

func newFakeClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

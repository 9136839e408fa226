package locallimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLocalLimiter(t *testing.T) {
	c := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := New(3, time.Second, c.Now)
	for range 3 {
		_, ok := l.AllowNewKey(t.Context(), "m1")
		require.True(t, ok)
	}
	c.Advance(250 * time.Millisecond)
	retry, ok := l.AllowNewKey(t.Context(), "m1")
	require.False(t, ok)
	require.Equal(t, 750*time.Millisecond, retry, "until the window turns")
	_, ok = l.AllowNewKey(t.Context(), "m2")
	require.True(t, ok, "per scope")
	c.Advance(750 * time.Millisecond)
	_, ok = l.AllowNewKey(t.Context(), "m1")
	require.True(t, ok, "a new window")
}

// testClock is a clock the test moves.
type testClock struct{ now time.Time }

func (c *testClock) Now() time.Time          { return c.now }
func (c *testClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

package payments

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Id prefixes, one per resource, so that an id says what it names.
const (
	orderIDPrefix = "ord_"
)

// idGenerator makes prefixed ULIDs. Within one millisecond the monotonic
// entropy increments instead of drawing fresh randomness, so ids made by this
// process sort in the order they were made even when the clock does not
// move; that keeps "ORDER BY id DESC" equal to "newest first". The entropy
// source is stateful, hence the mutex.
type idGenerator struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

func newIDGenerator() *idGenerator {
	return &idGenerator{entropy: ulid.Monotonic(rand.Reader, 0)}
}

// newID returns prefix followed by a ULID stamped with now.
func (g *idGenerator) newID(prefix string, now time.Time) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, err := ulid.New(ulid.Timestamp(now), g.entropy)
	if err != nil {
		// Only 2^80 increments within one millisecond (or a clock before
		// 1970) get here.
		return "", fmt.Errorf("make %sid: %w", prefix, err)
	}
	// Spelled into one buffer: one allocation for the id, not two.
	var buf [16 + ulid.EncodedSize]byte
	n := copy(buf[:16], prefix)
	if n < len(prefix) {
		return prefix + id.String(), nil
	}
	_ = id.MarshalTextTo(buf[n : n+ulid.EncodedSize]) // cannot fail: the size is right
	return string(buf[:n+ulid.EncodedSize]), nil
}

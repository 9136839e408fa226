package outbox

import (
	"context"
	"time"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
)

// PurgePublished deletes at most limit events published before before,
// oldest first, and returns how many it deleted (the retention purge,
// EVENT_RETENTION). An unpublished event is never deleted, however old:
// the table is the truth until the event is out. It returns an error
// wrapping database.ErrUnavailable when the database cannot answer.
func (d *Dispatcher) PurgePublished(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := dbtx.Purge(ctx, d.db, "outbox_events", "published_at IS NOT NULL AND published_at < ?", "published_at", limit, before.UTC())
	return n, database.Classify(err)
}

package merchants_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/testkit"
)

func TestCreateAndAuthenticate(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			store := merchants.NewStore(db.DB, nil)
			ctx := context.Background()

			m, key, err := store.Create(ctx, "initech")
			require.NoError(t, err)
			require.Regexp(t, regexp.MustCompile(`^mch_[0-9A-Z]{26}$`), m.ID)
			require.Regexp(t, regexp.MustCompile(`^sk_live_[0-9a-f]{32}$`), key)
			require.Equal(t, "initech", m.Name)

			got, err := store.Authenticate(ctx, key)
			require.NoError(t, err)
			require.Equal(t, m.ID, got)

			t.Run("the key is stored only hashed", func(t *testing.T) {
				var rows []struct {
					KeyHash   string
					KeyPrefix string
				}
				require.NoError(t, db.Raw("SELECT key_hash, key_prefix FROM api_keys WHERE merchant_id = ?", m.ID).Scan(&rows).Error)
				require.Len(t, rows, 1)
				require.Len(t, rows[0].KeyHash, 64)
				require.NotContains(t, rows[0].KeyHash, key[len("sk_live_"):])
				require.Equal(t, key[:len("sk_live_")+4], rows[0].KeyPrefix)
			})
			t.Run("two merchants, two keys", func(t *testing.T) {
				m2, key2, err := store.Create(ctx, "hooli")
				require.NoError(t, err)
				require.NotEqual(t, key, key2)
				got, err := store.Authenticate(ctx, key2)
				require.NoError(t, err)
				require.Equal(t, m2.ID, got)
			})
			t.Run("name taken", func(t *testing.T) {
				_, _, err := store.Create(ctx, "initech")
				require.ErrorIs(t, err, merchants.ErrNameTaken)
			})
			for _, name := range []string{"", "   ", strings.Repeat("n", 256), "acme\u202e", "ac\u200bme", "acme\x00"} {
				t.Run("invalid name "+strings.TrimSpace(name[:min(len(name), 5)]), func(t *testing.T) {
					_, _, err := store.Create(ctx, name)
					require.ErrorIs(t, err, merchants.ErrInvalidName)
				})
			}
			wrong := []struct{ name, key string }{
				{"empty", ""},
				{"unknown", "sk_live_00000000000000000000000000000000"},
				{"almost right", key[:len(key)-1]},
				{"too long", strings.Repeat("k", merchants.MaxKeyLength+1)},
			}
			for _, tt := range wrong {
				t.Run("wrong key "+tt.name, func(t *testing.T) {
					_, err := store.Authenticate(ctx, tt.key)
					require.ErrorIs(t, err, merchants.ErrUnauthorized)
				})
			}
		})
	}
}

func TestSeedDemo(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			ctx := context.Background()

			// Two "processes" (two stores, each with its own pool) start at
			// once, then one of them restarts.
			a := merchants.NewStore(db.DB, nil)
			b := merchants.NewStore(db.DB, nil)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, s := range []*merchants.Store{a, b} {
				wg.Go(func() { errs[i] = s.SeedDemo(ctx) })
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			require.NoError(t, a.SeedDemo(ctx), "seeding again is harmless")

			var n int64
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM merchants").Scan(&n).Error)
			require.Equal(t, int64(2), n)
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM api_keys").Scan(&n).Error)
			require.Equal(t, int64(2), n)

			for key, want := range map[string]string{"sk_test_acme": "mch_acme", "sk_test_globex": "mch_globex"} {
				got, err := a.Authenticate(ctx, key)
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
			_, err := a.Authenticate(ctx, "sk_test_initech")
			require.ErrorIs(t, err, merchants.ErrUnauthorized)
		})
	}
}

// TestRefuseDemoKeys: a store told to refuse the demo keys answers them
// as unknown even once another store (a replica in development) has seeded
// them into the shared database, before and after its caches expire, and
// tells once which demo merchants the database holds; other keys, and the
// seeding store, are untouched.
func TestRefuseDemoKeys(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			ctx := context.Background()
			c := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
			prod := merchants.NewStore(db.DB, c.Now)
			// One request at a time: the store calls back on the caller's
			// goroutine, so plain variables do.
			looked := map[string]int{}
			prod.LimitUnknownKeys(0, time.Minute, func(result string) { looked[result]++ })
			var warnings [][]string
			prod.RefuseDemoKeys(func(names []string) { warnings = append(warnings, names) })

			_, err := prod.Authenticate(ctx, "sk_test_acme")
			require.ErrorIs(t, err, merchants.ErrUnauthorized, "an empty database")
			require.NoError(t, merchants.NewStore(db.DB, nil).SeedDemo(ctx), "a replica seeds behind its back")

			for range 3 {
				for _, key := range []string{"sk_test_globex", "sk_test_acme"} {
					_, err := prod.Authenticate(ctx, key)
					require.ErrorIs(t, err, merchants.ErrUnauthorized, key)
				}
				c.Advance(merchants.CacheTTL) // past both caches' lifetimes
			}
			// acme's first answer came from the unknown-key cache of the
			// read before the seed; every later one from a read that found
			// the key and refused it.
			require.Equal(t, map[string]int{"unknown": 1, "demo": 5}, looked)
			require.Equal(t, [][]string{{"acme", "globex"}}, warnings, "one warning, naming every demo merchant the database holds")

			m, key, err := prod.Create(ctx, "initech")
			require.NoError(t, err)
			got, err := prod.Authenticate(ctx, key)
			require.NoError(t, err)
			require.Equal(t, m.ID, got, "a merchant's own key still works")

			dev := merchants.NewStore(db.DB, nil)
			got, err = dev.Authenticate(ctx, "sk_test_acme")
			require.NoError(t, err, "development keeps its demo keys")
			require.Equal(t, "mch_acme", got)
		})
	}
}

func TestAuthenticateCache(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			ctx := context.Background()
			c := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
			store := merchants.NewStore(db.DB, c.Now)
			require.NoError(t, store.SeedDemo(ctx))

			_, err := store.Authenticate(ctx, "sk_test_acme")
			require.NoError(t, err)

			// With the key gone from the database, the cache still answers
			// until its TTL runs out.
			require.NoError(t, db.Exec("DELETE FROM api_keys").Error)
			got, err := store.Authenticate(ctx, "sk_test_acme")
			require.NoError(t, err)
			require.Equal(t, "mch_acme", got)

			c.Advance(merchants.CacheTTL)
			_, err = store.Authenticate(ctx, "sk_test_acme")
			require.ErrorIs(t, err, merchants.ErrUnauthorized)
		})
	}
}

func TestAuthenticateDatabaseDown(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			ctx := context.Background()
			store := merchants.NewStore(db.DB, nil)
			require.NoError(t, store.SeedDemo(ctx))
			require.NoError(t, db.Close())

			_, err := store.Authenticate(ctx, "sk_test_globex")
			require.ErrorIs(t, err, database.ErrUnavailable)
			require.NotErrorIs(t, err, merchants.ErrUnauthorized, "a database outage is no verdict on the key")
		})
	}
}

// TestAuthenticateStormReadsOnce: when a key's cache entry is missing (or
// just expired) and a burst of requests arrives with it, one database read
// serves them all, instead of one connection each for the same row.
func TestAuthenticateStormReadsOnce(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			ctx := context.Background()
			store := merchants.NewStore(db.DB, nil)
			require.NoError(t, store.SeedDemo(ctx))

			var reads atomic.Int64
			require.NoError(t, db.DB.Callback().Query().Before("gorm:query").Register("test:count_key_reads", func(tx *gorm.DB) {
				if tx.Statement.Table == "api_keys" {
					reads.Add(1)
					time.Sleep(50 * time.Millisecond) // a slow read, so the burst overlaps it
				}
			}))

			const burst = 200
			var wg sync.WaitGroup
			errs := make(chan error, burst)
			start := make(chan struct{})
			for range burst {
				wg.Go(func() {
					<-start
					got, err := store.Authenticate(ctx, "sk_test_acme")
					if err == nil && got != "mch_acme" {
						err = errors.New("wrong merchant " + got)
					}
					errs <- err
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			// One read, or very few if a goroutine was descheduled between
			// its cache miss and joining the read; never one per request.
			require.LessOrEqual(t, reads.Load(), int64(3), "database reads for %d concurrent requests", burst)
		})
	}
}

// TestKnownKeyStormSpendsNoBudget: a burst of requests from one client
// with a known key that no cache holds yet (a fresh instance) shares one
// read, which the client pays for once and gets back: none of them is
// refused as over the budget of unknown keys, however small the budget.
// (Each request used to reserve a read of its own before joining the
// shared one, and the burst was refused past the budget: seen in
// TestRedisKilledMidLoad as 429 too_many_unknown_keys for sk_test_acme.)
func TestKnownKeyStormSpendsNoBudget(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			store := merchants.NewStore(db.DB, nil)
			require.NoError(t, store.SeedDemo(context.Background()))
			var limited atomic.Int64
			store.LimitUnknownKeys(5, time.Minute, func(result string) {
				if result == "limited" {
					limited.Add(1)
				}
			})
			require.NoError(t, db.DB.Callback().Query().Before("gorm:query").Register("test:slow_key_reads", func(tx *gorm.DB) {
				if tx.Statement.Table == "api_keys" {
					time.Sleep(50 * time.Millisecond) // a slow read, so the burst overlaps it
				}
			}))
			ctx := merchants.WithClient(context.Background(), "10.0.0.7")

			const burst = 100
			var wg sync.WaitGroup
			errs := make(chan error, burst)
			start := make(chan struct{})
			for range burst {
				wg.Go(func() {
					<-start
					_, err := store.Authenticate(ctx, "sk_test_acme")
					errs <- err
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Zero(t, limited.Load())

			// The budget is whole: five unknown keys are still read, the
			// sixth is refused unread.
			for i := range 5 {
				_, err := store.Authenticate(ctx, fmt.Sprintf("sk_test_wrong_%d", i))
				require.ErrorIs(t, err, merchants.ErrUnauthorized)
			}
			_, err := store.Authenticate(ctx, "sk_test_wrong_5")
			var refused *merchants.KeyBudgetError
			require.ErrorAs(t, err, &refused)
		})
	}
}

// TestUnknownKeyFloodReadsOnce: a flood of requests with a wrong key costs
// one database read, not one per request, until UnknownKeyTTL; a flood of
// distinct wrong keys keeps the negative cache bounded and never pushes a
// known key out of its own cache.
func TestUnknownKeyFloodReadsOnce(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			ctx := context.Background()
			c := testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
			store := merchants.NewStore(db.DB, c.Now)
			require.NoError(t, store.SeedDemo(ctx))
			var reads atomic.Int64
			require.NoError(t, db.DB.Callback().Query().Before("gorm:query").Register("test:count_key_reads", func(tx *gorm.DB) {
				if tx.Statement.Table == "api_keys" {
					reads.Add(1)
				}
			}))
			_, err := store.Authenticate(ctx, "sk_test_acme")
			require.NoError(t, err)
			reads.Store(0)

			const flood = 2000
			for range flood {
				_, err := store.Authenticate(ctx, "sk_live_guessed0000000000000000000000")
				require.ErrorIs(t, err, merchants.ErrUnauthorized)
			}
			require.EqualValues(t, 1, reads.Load(), "database reads for %d requests with one unknown key", flood)

			c.Advance(merchants.UnknownKeyTTL)
			_, err = store.Authenticate(ctx, "sk_live_guessed0000000000000000000000")
			require.ErrorIs(t, err, merchants.ErrUnauthorized)
			require.EqualValues(t, 2, reads.Load(), "the negative entry expires")

			// Distinct wrong keys: one read each, a bounded set, and the
			// known key still answers from its cache.
			reads.Store(0)
			for i := range merchants.UnknownKeyCacheSize + 500 {
				_, err := store.Authenticate(ctx, fmt.Sprintf("sk_live_wrong%d", i))
				require.ErrorIs(t, err, merchants.ErrUnauthorized)
			}
			require.EqualValues(t, merchants.UnknownKeyCacheSize+500, reads.Load())
			reads.Store(0)
			got, err := store.Authenticate(ctx, "sk_test_acme")
			require.NoError(t, err)
			require.Equal(t, "mch_acme", got)
			require.Zero(t, reads.Load(), "wrong keys pushed a known key out of its cache")
			require.LessOrEqual(t, merchants.UnknownKeysCachedForTest(store), merchants.UnknownKeyCacheSize)
		})
	}
}

package payments_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/testkit"
)

func newFixedClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC))
}

// setup returns a Service on a fresh database of the dialect, with the
// merchants mch_a and mch_b in it.
func setup(t *testing.T, dialect database.Dialect) (*payments.Service, *database.DB, *testkit.Clock) {
	t.Helper()
	db := testkit.OpenDB(t, dialect)
	for _, id := range []string{"mch_a", "mch_b"} {
		require.NoError(t, db.Exec("INSERT INTO merchants (id, name, created_at) VALUES (?, ?, ?)", id, id, time.Now().UTC()).Error)
	}
	clock := newFixedClock()
	return payments.NewService(paymentsdb.New(db.DB), clock.Now), db, clock
}

func countOrders(t *testing.T, db *database.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM orders").Scan(&n).Error)
	return n
}

func TestCreateAndGetOrder(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, db, clock := setup(t, d)
			ctx := context.Background()

			in := validInput()
			in.Items[0].Name = "Café ☕"
			created, err := svc.CreateOrder(ctx, "mch_a", in)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(created.ID, "ord_"), created.ID)
			require.Len(t, created.ID, len("ord_")+26)
			require.Equal(t, clock.Now().Truncate(time.Microsecond), created.CreatedAt)
			require.Equal(t, int64(2500), created.AmountTotal)

			got, err := svc.GetOrder(ctx, "mch_a", created.ID)
			require.NoError(t, err)
			require.Equal(t, created, got, "an order reads back exactly as it was made")
			require.Equal(t, int64(1), countOrders(t, db))

			t.Run("no metadata reads back as an empty map", func(t *testing.T) {
				in := validInput()
				in.Metadata = nil
				o, err := svc.CreateOrder(ctx, "mch_a", in)
				require.NoError(t, err)
				got, err := svc.GetOrder(ctx, "mch_a", o.ID)
				require.NoError(t, err)
				require.Equal(t, map[string]string{}, got.Metadata)
			})
			t.Run("unknown id", func(t *testing.T) {
				_, err := svc.GetOrder(ctx, "mch_a", "ord_nope")
				require.ErrorIs(t, err, payments.ErrNotFound)
			})
			t.Run("another merchant's order is not found", func(t *testing.T) {
				_, err := svc.GetOrder(ctx, "mch_b", created.ID)
				require.ErrorIs(t, err, payments.ErrNotFound)
			})
			t.Run("invalid input writes nothing", func(t *testing.T) {
				before := countOrders(t, db)
				_, err := svc.CreateOrder(ctx, "mch_a", payments.NewOrderInput{})
				require.ErrorIs(t, err, payments.ErrValidation)
				require.Equal(t, before, countOrders(t, db))
			})
		})
	}
}

// statementCounter is a GORM logger that records every statement it sees.
type statementCounter struct {
	logger.Interface
	mu  sync.Mutex
	sql []string
}

func (s *statementCounter) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, sql)
}

func TestCreateOrderIsOneInsert(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			require.NoError(t, db.Exec("INSERT INTO merchants (id, name, created_at) VALUES ('mch_a', 'a', ?)", time.Now().UTC()).Error)
			counter := &statementCounter{Interface: logger.Discard}
			svc := payments.NewService(paymentsdb.New(db.Session(&gorm.Session{Logger: counter})), nil)

			_, err := svc.CreateOrder(context.Background(), "mch_a", validInput())
			require.NoError(t, err)
			require.Len(t, counter.sql, 1, "statements: %q", counter.sql)
			require.True(t, strings.HasPrefix(counter.sql[0], "INSERT INTO"), counter.sql[0])
			require.NotContains(t, counter.sql[0], "RETURNING")
		})
	}
}

func TestCreateOrderJoinsTheTransactionInContext(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, db, _ := setup(t, d)
			ctx := context.Background()
			errRollback := errors.New("roll back")

			var id string
			err := database.Transaction(ctx, db.DB, func(ctx context.Context) error {
				o, err := svc.CreateOrder(ctx, "mch_a", validInput())
				require.NoError(t, err)
				id = o.ID
				// Visible inside the transaction ...
				_, err = svc.GetOrder(ctx, "mch_a", id)
				require.NoError(t, err)
				return errRollback
			})
			require.ErrorIs(t, err, errRollback)
			// ... and gone with it.
			_, err = svc.GetOrder(ctx, "mch_a", id)
			require.ErrorIs(t, err, payments.ErrNotFound)
			require.Zero(t, countOrders(t, db))
		})
	}
}

func TestListOrders(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, _, clock := setup(t, d)
			ctx := context.Background()

			// 25 orders of mch_a, customers alternating; the clock stands still
			// for most of them, so the order of ids rests on the monotonic
			// entropy, not on the time.
			var created []string // oldest first
			for i := range 25 {
				in := validInput()
				in.CustomerID = fmt.Sprintf("cus_%d", i%2)
				o, err := svc.CreateOrder(ctx, "mch_a", in)
				require.NoError(t, err)
				created = append(created, o.ID)
				if i%10 == 9 {
					clock.Advance(time.Millisecond)
				}
			}
			_, err := svc.CreateOrder(ctx, "mch_b", validInput())
			require.NoError(t, err)
			newestFirst := slices.Clone(created)
			slices.Reverse(newestFirst)

			ids := func(orders []payments.Order) []string {
				out := make([]string, len(orders))
				for i, o := range orders {
					out[i] = o.ID
				}
				return out
			}

			t.Run("pages walk every order once, newest first", func(t *testing.T) {
				var seen []string
				var pages []bool
				q := payments.ListQuery{Limit: 10}
				for {
					page, hasMore, err := svc.ListOrders(ctx, "mch_a", q)
					require.NoError(t, err)
					seen = append(seen, ids(page)...)
					pages = append(pages, hasMore)
					if !hasMore {
						break
					}
					q.StartingAfter = page[len(page)-1].ID
				}
				require.Equal(t, newestFirst, seen)
				require.Equal(t, []bool{true, true, false}, pages)
			})
			t.Run("default limit is 10", func(t *testing.T) {
				page, hasMore, err := svc.ListOrders(ctx, "mch_a", payments.ListQuery{})
				require.NoError(t, err)
				require.Len(t, page, payments.DefaultListLimit)
				require.True(t, hasMore)
			})
			t.Run("a page that ends exactly at the last order has no more", func(t *testing.T) {
				page, hasMore, err := svc.ListOrders(ctx, "mch_a", payments.ListQuery{Limit: 5, StartingAfter: newestFirst[19]})
				require.NoError(t, err)
				require.Equal(t, newestFirst[20:], ids(page))
				require.False(t, hasMore)
			})
			t.Run("after the oldest order the page is empty", func(t *testing.T) {
				page, hasMore, err := svc.ListOrders(ctx, "mch_a", payments.ListQuery{StartingAfter: created[0]})
				require.NoError(t, err)
				require.Empty(t, page)
				require.False(t, hasMore)
			})
			t.Run("customer filter", func(t *testing.T) {
				page, hasMore, err := svc.ListOrders(ctx, "mch_a", payments.ListQuery{Limit: 100, CustomerID: "cus_1"})
				require.NoError(t, err)
				require.False(t, hasMore)
				require.Len(t, page, 12)
				for _, o := range page {
					require.Equal(t, "cus_1", o.CustomerID)
				}
				require.True(t, slices.IsSortedFunc(page, func(a, b payments.Order) int { return strings.Compare(b.ID, a.ID) }))
			})
			t.Run("a merchant sees only its own orders", func(t *testing.T) {
				page, hasMore, err := svc.ListOrders(ctx, "mch_b", payments.ListQuery{Limit: 100})
				require.NoError(t, err)
				require.Len(t, page, 1)
				require.False(t, hasMore)
				require.Equal(t, "mch_b", page[0].MerchantID)
			})

			invalid := []struct {
				name  string
				q     payments.ListQuery
				field string
			}{
				{"limit below 1", payments.ListQuery{Limit: -1}, "limit"},
				{"limit above 100", payments.ListQuery{Limit: 101}, "limit"},
				{"unknown starting_after", payments.ListQuery{StartingAfter: "ord_nope"}, "starting_after"},
			}
			for _, tt := range invalid {
				t.Run(tt.name, func(t *testing.T) {
					_, _, err := svc.ListOrders(ctx, "mch_a", tt.q)
					var ve *payments.ValidationError
					require.ErrorAs(t, err, &ve)
					require.Equal(t, tt.field, ve.Fields[0].Field)
				})
			}
			t.Run("another merchant's id is no cursor", func(t *testing.T) {
				_, _, err := svc.ListOrders(ctx, "mch_b", payments.ListQuery{StartingAfter: created[3]})
				var ve *payments.ValidationError
				require.ErrorAs(t, err, &ve)
				require.Equal(t, "starting_after", ve.Fields[0].Field)
			})
		})
	}
}

func TestOrderIDsAreUniqueAndOrderedUnderConcurrency(t *testing.T) {
	// A frozen clock puts every id in the same millisecond: only the
	// monotonic entropy, behind its mutex, keeps them apart.
	svc := payments.NewService(nopStore{}, newFixedClock().Now)
	const workers, each = 8, 200
	results := make([][]string, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				o, err := svc.CreateOrder(context.Background(), "mch_a", validInput())
				if err != nil {
					errs[w] = err // require may only stop the test's own goroutine
					return
				}
				results[w] = append(results[w], o.ID)
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	seen := map[string]bool{}
	for _, ids := range results {
		require.True(t, slices.IsSorted(ids), "one goroutine's ids grow")
		for _, id := range ids {
			require.False(t, seen[id], "duplicate id %s", id)
			seen[id] = true
		}
	}
	require.Len(t, seen, workers*each)
}

// nopStore accepts every order and finds none.
type nopStore struct{}

func (nopStore) CreateOrder(context.Context, payments.Order) error { return nil }
func (nopStore) GetOrder(context.Context, string, string) (payments.Order, error) {
	return payments.Order{}, payments.ErrNotFound
}
func (nopStore) ListOrders(context.Context, string, payments.OrderFilter) ([]payments.Order, error) {
	return nil, nil
}

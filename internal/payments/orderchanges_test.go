package payments_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/testkit"
)

func validAddress() payments.ShippingAddress {
	return payments.ShippingAddress{
		Name: "Ada Lovelace", Line1: "Rua Augusta, 1500", Line2: "Apto 42",
		City: "São Paulo", PostalCode: "01304-001", Country: "BR",
	}
}

func TestShippingAddressValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(a *payments.ShippingAddress)
		want   []payments.FieldError // nil: valid
	}{
		{name: "valid", change: func(*payments.ShippingAddress) {}},
		{name: "line2 and postal code are optional", change: func(a *payments.ShippingAddress) { a.Line2, a.PostalCode = "", "" }},
		{name: "required fields", change: func(a *payments.ShippingAddress) { *a = payments.ShippingAddress{} },
			want: []payments.FieldError{
				{Field: "name", Message: "is required"}, {Field: "line1", Message: "is required"},
				{Field: "city", Message: "is required"}, {Field: "country", Message: "is required"},
			}},
		{name: "too long", change: func(a *payments.ShippingAddress) {
			a.Line1, a.PostalCode = strings.Repeat("é", 256), strings.Repeat("9", 21)
		}, want: []payments.FieldError{
			{Field: "line1", Message: "must be at most 255 characters"},
			{Field: "postal_code", Message: "must be at most 20 characters"},
		}},
		{name: "control characters", change: func(a *payments.ShippingAddress) { a.Name = "Ada\x00" },
			want: []payments.FieldError{{Field: "name", Message: "must not contain control characters"}}},
		{name: "country in lower case", change: func(a *payments.ShippingAddress) { a.Country = "br" },
			want: []payments.FieldError{{Field: "country", Message: "must be a two-letter upper-case ISO 3166-1 alpha-2 code"}}},
		{name: "country alpha-3", change: func(a *payments.ShippingAddress) { a.Country = "BRA" },
			want: []payments.FieldError{{Field: "country", Message: "must be a two-letter upper-case ISO 3166-1 alpha-2 code"}}},
		{name: "country not assigned (UK is reserved, GB is the code)", change: func(a *payments.ShippingAddress) { a.Country = "UK" },
			want: []payments.FieldError{{Field: "country", Message: "is not an ISO 3166-1 alpha-2 country code"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validAddress()
			tt.change(&a)
			err := a.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			var ve *payments.ValidationError
			require.ErrorAs(t, err, &ve)
			require.ErrorIs(t, err, payments.ErrValidation)
			require.Equal(t, tt.want, ve.Fields)
		})
	}
}

// storedOrder is what the orders table holds for one order, read around
// the Service: the tests count effects in the database, not in answers.
type storedOrder struct {
	Version     int64
	AmountTotal int64
	Items       int
	Address     *payments.ShippingAddress
	UpdatedAt   time.Time
}

func readStoredOrder(t *testing.T, db *database.DB, id string) storedOrder {
	t.Helper()
	var row struct {
		Version         int64
		AmountTotal     int64
		Items           string
		ShippingAddress *string
		UpdatedAt       time.Time
	}
	require.NoError(t, db.Raw("SELECT version, amount_total, items, shipping_address, updated_at FROM orders WHERE id = ?", id).Scan(&row).Error)
	var items []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(row.Items), &items))
	s := storedOrder{Version: row.Version, AmountTotal: row.AmountTotal, Items: len(items), UpdatedAt: row.UpdatedAt.UTC()}
	if row.ShippingAddress != nil {
		var a struct {
			Name, Line1, Line2, City, Country string
			PostalCode                        string `json:"postal_code"`
		}
		require.NoError(t, json.Unmarshal([]byte(*row.ShippingAddress), &a))
		s.Address = &payments.ShippingAddress{Name: a.Name, Line1: a.Line1, Line2: a.Line2, City: a.City, PostalCode: a.PostalCode, Country: a.Country}
	}
	return s
}

// startPayment does what a payment's first phase does (pay.go), in a
// transaction of its own: lock the order, insert a pending payment of its
// total.
func startPayment(t *testing.T, db *database.DB, o payments.Order) error {
	t.Helper()
	store := paymentsdb.New(db.DB)
	return store.InTx(context.Background(), func(ctx context.Context) error {
		return startPaymentIn(ctx, store, o, nil, nil)
	})
}

func TestSetShippingAddress(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, db, clock := setup(t, d)
			ctx := context.Background()
			o, err := svc.CreateOrder(ctx, "mch_a", validInput())
			require.NoError(t, err)
			require.Nil(t, o.ShippingAddress)

			home, office := validAddress(), validAddress()
			office.Line1, office.Line2 = "Av. Paulista, 1000", ""

			// Steps run in order, each on the state the previous one left.
			steps := []struct {
				name        string
				merchant    string
				addr        payments.ShippingAddress
				pre         payments.Precondition
				wantErr     error
				wantVersion int64 // stored afterwards
				wantAddr    *payments.ShippingAddress
			}{
				{name: "first PUT sets it and bumps the version", merchant: "mch_a", addr: home, wantVersion: 2, wantAddr: &home},
				{name: "the same PUT again changes nothing, not even the version", merchant: "mch_a", addr: home, wantVersion: 2, wantAddr: &home},
				{name: "the same PUT at the current version is a no-op too", merchant: "mch_a", addr: home, pre: payments.IfVersion(2), wantVersion: 2, wantAddr: &home},
				{name: "another address at the current version", merchant: "mch_a", addr: office, pre: payments.IfVersion(2), wantVersion: 3, wantAddr: &office},
				{name: "a stale version is refused and changes nothing", merchant: "mch_a", addr: home, pre: payments.IfVersion(2),
					wantErr: payments.ErrVersionMismatch, wantVersion: 3, wantAddr: &office},
				{name: "stale even when the address is the stored one: the precondition comes first", merchant: "mch_a", addr: office, pre: payments.IfVersion(2),
					wantErr: payments.ErrVersionMismatch, wantVersion: 3, wantAddr: &office},
				{name: "an If-Match listing several versions", merchant: "mch_a", addr: home, pre: payments.Precondition{Required: true, Versions: []int64{1, 3}},
					wantVersion: 4, wantAddr: &home},
				{name: "a precondition that names no version (only weak tags) matches nothing", merchant: "mch_a", addr: office, pre: payments.Precondition{Required: true},
					wantErr: payments.ErrVersionMismatch, wantVersion: 4, wantAddr: &home},
				{name: "invalid address", merchant: "mch_a", addr: payments.ShippingAddress{Country: "XX"},
					wantErr: payments.ErrValidation, wantVersion: 4, wantAddr: &home},
				{name: "another merchant's order is not found", merchant: "mch_b", addr: office,
					wantErr: payments.ErrNotFound, wantVersion: 4, wantAddr: &home},
			}
			for _, st := range steps {
				t.Run(st.name, func(t *testing.T) {
					clock.Advance(time.Second)
					before := readStoredOrder(t, db, o.ID)
					got, err := svc.SetShippingAddress(ctx, st.merchant, o.ID, st.addr, st.pre)
					after := readStoredOrder(t, db, o.ID)
					require.Equal(t, st.wantVersion, after.Version)
					require.Equal(t, st.wantAddr, after.Address)
					if st.wantErr != nil {
						require.ErrorIs(t, err, st.wantErr)
						require.Equal(t, before, after, "a refused PUT changes nothing")
						return
					}
					require.NoError(t, err)
					require.Equal(t, after.Version, got.Version, "the answer shows the stored version")
					require.Equal(t, st.wantAddr, got.ShippingAddress)
					if before.Version == after.Version {
						require.Equal(t, before.UpdatedAt, after.UpdatedAt, "a no-op does not even touch updated_at")
					} else {
						require.Equal(t, clock.Now().Truncate(time.Microsecond), after.UpdatedAt)
					}
					read, err := svc.GetOrder(ctx, "mch_a", o.ID)
					require.NoError(t, err)
					require.Equal(t, got, read, "what the PUT answers is what GET reads")
				})
			}
		})
	}
}

func TestShippingAddressAndPayments(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, db, _ := setup(t, d)
			ctx := context.Background()
			home, office := validAddress(), validAddress()
			office.Line1 = "Av. Paulista, 1000"

			o, err := svc.CreateOrder(ctx, "mch_a", validInput())
			require.NoError(t, err)
			require.NoError(t, startPayment(t, db, o))
			_, err = svc.SetShippingAddress(ctx, "mch_a", o.ID, home, payments.Precondition{})
			require.NoError(t, err, "a payment in flight does not stop it: the amount does not depend on the address")

			require.NoError(t, paymentsdb.New(db.DB).MarkOrderPaid(ctx, "mch_a", o.ID, time.Now().UTC()))
			paid := readStoredOrder(t, db, o.ID)

			_, err = svc.SetShippingAddress(ctx, "mch_a", o.ID, office, payments.Precondition{})
			require.ErrorIs(t, err, payments.ErrOrderAlreadyPaid)
			require.Equal(t, paid, readStoredOrder(t, db, o.ID))

			got, err := svc.SetShippingAddress(ctx, "mch_a", o.ID, home, payments.Precondition{})
			require.NoError(t, err, "a retry of the PUT that set it still succeeds: it changes nothing")
			require.Equal(t, paid.Version, got.Version)
			require.Equal(t, paid, readStoredOrder(t, db, o.ID))
		})
	}
}

func TestAddOrderItem(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, db, clock := setup(t, d)
			ctx := context.Background()
			o, err := svc.CreateOrder(ctx, "mch_a", validInput()) // 2 × 1250
			require.NoError(t, err)
			tea := payments.Item{SKU: "SKU-2", Name: "Tea", Quantity: 3, UnitAmount: 800}

			steps := []struct {
				name        string
				merchant    string
				item        payments.Item
				pre         payments.Precondition
				wantErr     error
				wantVersion int64
				wantItems   int
				wantTotal   int64
			}{
				{name: "adds a line and recomputes the total", merchant: "mch_a", item: tea, wantVersion: 2, wantItems: 2, wantTotal: 2500 + 2400},
				{name: "the same item again is another line: cumulative", merchant: "mch_a", item: tea, wantVersion: 3, wantItems: 3, wantTotal: 2500 + 4800},
				{name: "at the current version", merchant: "mch_a", item: tea, pre: payments.IfVersion(3), wantVersion: 4, wantItems: 4, wantTotal: 2500 + 7200},
				{name: "a stale version is refused and changes nothing", merchant: "mch_a", item: tea, pre: payments.IfVersion(3),
					wantErr: payments.ErrVersionMismatch, wantVersion: 4, wantItems: 4, wantTotal: 2500 + 7200},
				{name: "an invalid item", merchant: "mch_a", item: payments.Item{SKU: "S", Quantity: 0},
					wantErr: payments.ErrValidation, wantVersion: 4, wantItems: 4, wantTotal: 2500 + 7200},
				{name: "a total over the limit", merchant: "mch_a", item: payments.Item{SKU: "S", Name: "N", Quantity: payments.MaxQuantity, UnitAmount: payments.MaxUnitAmount},
					wantErr: payments.ErrValidation, wantVersion: 4, wantItems: 4, wantTotal: 2500 + 7200},
				{name: "another merchant's order is not found", merchant: "mch_b", item: tea,
					wantErr: payments.ErrNotFound, wantVersion: 4, wantItems: 4, wantTotal: 2500 + 7200},
			}
			for _, st := range steps {
				t.Run(st.name, func(t *testing.T) {
					clock.Advance(time.Second)
					before := readStoredOrder(t, db, o.ID)
					got, err := svc.AddOrderItem(ctx, st.merchant, o.ID, st.item, st.pre)
					after := readStoredOrder(t, db, o.ID)
					require.Equal(t, st.wantVersion, after.Version)
					require.Equal(t, st.wantItems, after.Items)
					require.Equal(t, st.wantTotal, after.AmountTotal)
					if st.wantErr != nil {
						require.ErrorIs(t, err, st.wantErr)
						require.Equal(t, before, after)
						return
					}
					require.NoError(t, err)
					require.Equal(t, after.Version, got.Version)
					require.Equal(t, after.AmountTotal, got.AmountTotal)
					require.Len(t, got.Items, after.Items)
					require.Equal(t, st.item, got.Items[len(got.Items)-1])
					require.Equal(t, clock.Now().Truncate(time.Microsecond), after.UpdatedAt)
				})
			}

			t.Run("an order at the item limit", func(t *testing.T) {
				in := validInput()
				in.Items = make([]payments.Item, payments.MaxItems)
				for i := range in.Items {
					in.Items[i] = tea
				}
				full, err := svc.CreateOrder(ctx, "mch_a", in)
				require.NoError(t, err)
				_, err = svc.AddOrderItem(ctx, "mch_a", full.ID, tea, payments.Precondition{})
				var ve *payments.ValidationError
				require.ErrorAs(t, err, &ve)
				require.Equal(t, []payments.FieldError{{Field: "items", Message: "the order already has the most items, 100"}}, ve.Fields)
				require.Equal(t, payments.MaxItems, readStoredOrder(t, db, full.ID).Items)
			})
		})
	}
}

func TestAddOrderItemRefusedOncePaymentTookTheTotal(t *testing.T) {
	tea := payments.Item{SKU: "SKU-2", Name: "Tea", Quantity: 1, UnitAmount: 800}
	cases := []struct {
		name   string
		status payments.Status // of the payment; "" for none, and the order paid
	}{
		{name: "payment pending", status: payments.StatusPending},
		{name: "payment processing", status: payments.StatusProcessing},
		{name: "payment succeeded, order paid", status: payments.StatusSucceeded},
		{name: "payment failed: the order is payable again", status: payments.StatusFailed},
	}
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, db, _ := setup(t, d)
			ctx := context.Background()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					o, err := svc.CreateOrder(ctx, "mch_a", validInput())
					require.NoError(t, err)
					require.NoError(t, startPayment(t, db, o))
					require.NoError(t, db.Exec("UPDATE payments SET status = ? WHERE order_id = ?", string(tc.status), o.ID).Error)
					if tc.status == payments.StatusSucceeded {
						require.NoError(t, paymentsdb.New(db.DB).MarkOrderPaid(ctx, "mch_a", o.ID, time.Now().UTC()))
					}
					before := readStoredOrder(t, db, o.ID)

					_, err = svc.AddOrderItem(ctx, "mch_a", o.ID, tea, payments.Precondition{})
					if tc.status == payments.StatusFailed {
						require.NoError(t, err)
						require.Equal(t, before.Items+1, readStoredOrder(t, db, o.ID).Items)
						return
					}
					if tc.status == payments.StatusSucceeded {
						require.ErrorIs(t, err, payments.ErrOrderAlreadyPaid)
					} else {
						// In flight: a conflict that clears, not stored.
						require.ErrorIs(t, err, payments.ErrPaymentInProgress)
					}
					require.Equal(t, before, readStoredOrder(t, db, o.ID))
				})
			}
		})
	}
}

// TestAddOrderItemWaitsForAPaymentsFirstPhase races an added item against a
// payment that has locked the order and taken its total but not committed.
// The item must wait and then be refused: otherwise the order would end up
// paid for less than its total. On PostgreSQL the test waits until the add
// is really blocked behind the payment, the interleaving where a plain
// conditional UPDATE (without the row lock first) would check for payments
// with a snapshot from before the payment committed, and let the item in.
func TestAddOrderItemWaitsForAPaymentsFirstPhase(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, db, _ := setup(t, d)
			ctx := context.Background()
			o, err := svc.CreateOrder(ctx, "mch_a", validInput())
			require.NoError(t, err)

			var paymentPID int64
			started, release := make(chan struct{}), make(chan struct{})
			paid := make(chan error, 1)
			go func() {
				store := paymentsdb.New(db.DB)
				paid <- store.InTx(ctx, func(ctx context.Context) error {
					if d == database.Postgres {
						if err := dbtx.Conn(ctx, db.DB).Raw("SELECT pg_backend_pid()").Scan(&paymentPID).Error; err != nil {
							return err
						}
					}
					return startPaymentIn(ctx, store, o, started, release)
				})
			}()
			<-started

			added := make(chan error, 1)
			go func() {
				_, err := svc.AddOrderItem(ctx, "mch_a", o.ID, payments.Item{SKU: "S", Name: "N", Quantity: 1, UnitAmount: 1}, payments.Precondition{})
				added <- err
			}()
			if d == database.Postgres {
				deadline := time.Now().Add(10 * time.Second)
				for {
					var blocked int64
					require.NoError(t, db.Raw("SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))", paymentPID).Scan(&blocked).Error)
					if blocked > 0 {
						break
					}
					require.True(t, time.Now().Before(deadline), "the added item never waited for the payment")
					time.Sleep(5 * time.Millisecond)
				}
			}
			close(release)
			require.NoError(t, <-paid)
			require.ErrorIs(t, <-added, payments.ErrPaymentInProgress, "the payment is in flight (pending) when the item comes")

			var amount int64
			require.NoError(t, db.Raw("SELECT amount FROM payments WHERE order_id = ?", o.ID).Scan(&amount).Error)
			stored := readStoredOrder(t, db, o.ID)
			require.Equal(t, 1, stored.Items)
			require.Equal(t, amount, stored.AmountTotal, "the payment charges what the order totals")
		})
	}
}

// startPaymentIn is startPayment inside the caller's transaction. With
// started, it says when the payment is in, then holds the transaction open
// until hold is closed.
func startPaymentIn(ctx context.Context, store *paymentsdb.Store, o payments.Order, started chan<- struct{}, hold <-chan struct{}) error {
	locked, err := store.LockOrder(ctx, o.MerchantID, o.ID)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	id := "pay_" + o.ID
	if err := store.CreatePayment(ctx, payments.Payment{
		ID: id, MerchantID: o.MerchantID, OrderID: o.ID, Amount: locked.AmountTotal, Currency: locked.Currency,
		PaymentMethod: "pm_card_visa", Status: payments.StatusPending, ProviderKey: id, IdempotencyKey: "k-" + id,
		CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		return err
	}
	if started != nil {
		close(started)
		<-hold
	}
	return nil
}

// TestConcurrentWritersOfOneVersion sends n changes at once, all made from
// the same read (the same If-Match), and counts what the database kept:
// exactly one change, one version more. Without a precondition every change
// applies, each to the version before it, and none is lost.
func TestConcurrentWritersOfOneVersion(t *testing.T) {
	const n = 16
	type change func(svc *payments.Service, id string, i int, pre payments.Precondition) error
	address := func(svc *payments.Service, id string, i int, pre payments.Precondition) error {
		a := validAddress()
		a.Line2 = fmt.Sprintf("Apto %d", i)
		_, err := svc.SetShippingAddress(context.Background(), "mch_a", id, a, pre)
		return err
	}
	item := func(svc *payments.Service, id string, i int, pre payments.Precondition) error {
		_, err := svc.AddOrderItem(context.Background(), "mch_a", id, payments.Item{SKU: fmt.Sprintf("S-%d", i), Name: "N", Quantity: 1, UnitAmount: 100}, pre)
		return err
	}
	cases := []struct {
		name        string
		change      change
		pre         payments.Precondition
		wantWinners int
		wantVersion int64
		wantItems   int
	}{
		{name: "shipping address, same If-Match", change: address, pre: payments.IfVersion(1), wantWinners: 1, wantVersion: 2, wantItems: 1},
		{name: "item, same If-Match", change: item, pre: payments.IfVersion(1), wantWinners: 1, wantVersion: 2, wantItems: 2},
		{name: "shipping address, no If-Match", change: address, wantWinners: n, wantVersion: 1 + n, wantItems: 1},
		{name: "item, no If-Match", change: item, wantWinners: n, wantVersion: 1 + n, wantItems: 1 + n},
	}
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			svc, db, _ := setup(t, d)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					o, err := svc.CreateOrder(context.Background(), "mch_a", validInput())
					require.NoError(t, err)
					errs := make([]error, n)
					start := make(chan struct{})
					var wg sync.WaitGroup
					for i := range n {
						wg.Go(func() {
							<-start
							errs[i] = tc.change(svc, o.ID, i, tc.pre)
						})
					}
					close(start)
					wg.Wait()

					winners := 0
					for _, err := range errs {
						if err == nil {
							winners++
							continue
						}
						require.True(t, errors.Is(err, payments.ErrVersionMismatch), "a loser learns that the version moved: %v", err)
					}
					require.Equal(t, tc.wantWinners, winners)
					stored := readStoredOrder(t, db, o.ID)
					require.Equal(t, tc.wantVersion, stored.Version)
					require.Equal(t, tc.wantItems, stored.Items)
					require.Equal(t, int64(2500+100*(tc.wantItems-1)), stored.AmountTotal)
				})
			}
		})
	}
}

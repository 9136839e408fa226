package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Page sizes of ListOrders.
const (
	DefaultListLimit = 10
	MaxListLimit     = 100
)

// Service runs the domain's use cases for one merchant at a time: the
// merchant id is an argument of every method, and a merchant never reaches
// another merchant's records.
type Service struct {
	store    Store
	clock    func() time.Time
	ids      *idGenerator
	pay      PaymentStore
	provider Provider
	// charges and refunds run payments and refunds on the idempotency
	// core's skeleton of outside calls (WithOutsideCalls).
	charges *idempotency.Effect[Payment, ChargeResult]
	refunds *idempotency.Effect[Refund, RefundResult]
	// orphanRefunds refunds charges nobody asked for (orphan.go).
	orphanRefunds *idempotency.Effect[Orphan, RefundResult]
	events        EventStore
	tracer        Tracer
	// customers is optional, like pay: a Service of orders alone serves
	// tests of the order rules.
	customers CustomerStore
	// eventLookup bounds the provider lookup of one webhook event;
	// onEvent hears each event's outcome (metrics).
	eventLookup time.Duration
	onEvent     func(outcome string)
	// chargeAnswers and refundAnswers hold the provider's final answers
	// to webhook lookups a short while, and share concurrent lookups of
	// one provider key (eventlookups.go).
	chargeAnswers *finalAnswers[ChargeResult]
	refundAnswers *finalAnswers[RefundResult]
	log           *slog.Logger
}

// Option configures a Service.
type Option func(*Service)

// WithPayments turns on payments and refunds: their store and the provider
// that charges.
func WithPayments(store PaymentStore, provider Provider) Option {
	return func(s *Service) { s.pay, s.provider = store, provider }
}

// WithProviderEvents tunes how webhook events are confirmed: lookup bounds
// the provider lookup of one event (zero: DefaultEventLookupTimeout), and
// onOutcome, if set, hears each event's EventOutcome (metrics; cheap and
// safe for concurrent use). log, if set, receives forged and mismatched
// events.
func WithProviderEvents(lookup time.Duration, onOutcome func(outcome string), log *slog.Logger) Option {
	return func(s *Service) {
		s.eventLookup, s.onEvent = lookup, onOutcome
		if log != nil {
			s.log = log
		}
	}
}

// WithOutsideCalls runs payments and refunds (WithPayments) on k's
// skeleton for outside calls (idempotency.Effect): k derives their ids and
// provider keys, fences every provider call, settles them later through its
// reconciler, and stores the client's answers, which payment and refund
// build (answers.Payment and answers.Refund, which the handlers answer
// with too). Give it after WithPayments.
func WithOutsideCalls(k *idempotency.Keeper, payment func(Payment) idempotency.Answer, refund func(Refund) idempotency.Answer) Option {
	return func(s *Service) {
		if s.pay == nil {
			panic("payments: WithOutsideCalls needs WithPayments first")
		}
		s.orphanRefunds = idempotency.Register(k, s.orphanRefundEffect())
		s.charges = idempotency.Register(k, s.chargeEffect(payment))
		s.refunds = idempotency.Register(k, s.refundEffect(refund))
	}
}

// NewService returns a Service over store. clock tells the time of new
// records; nil means the wall clock.
func NewService(store Store, clock func() time.Time, opts ...Option) *Service {
	if clock == nil {
		clock = time.Now
	}
	s := &Service{store: store, clock: clock, ids: newIDGenerator(), tracer: noTracer{}, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	s.chargeAnswers = newFinalAnswers[ChargeResult](DefaultEventCacheTTL, DefaultEventCacheSize, s.eventLookup, s.clock)
	s.refundAnswers = newFinalAnswers[RefundResult](DefaultEventCacheTTL, DefaultEventCacheSize, s.eventLookup, s.clock)
	return s
}

// Close stops the lookups set for the end of a paced interval (see
// finalAnswers) and waits for the ones at work: call it before the
// database closes. The service serves nothing after.
func (s *Service) Close() {
	s.chargeAnswers.close()
	s.refundAnswers.close()
}

// now is the clock in UTC, truncated to microseconds: that is what both
// PostgreSQL and the SQLite driver keep, so a record read back equals the
// one that was written.
func (s *Service) now() time.Time {
	return s.clock().UTC().Truncate(time.Microsecond)
}

// CreateOrder validates in and stores a new order, pending payment, for the
// merchant. It writes exactly one row with one statement, inside the
// transaction carried by ctx when there is one.
//
// It returns a *ValidationError (wrapping ErrValidation) for invalid input,
// or an error wrapping database.ErrUnavailable.
func (s *Service) CreateOrder(ctx context.Context, merchantID string, in NewOrderInput) (Order, error) {
	now := s.now()
	id, err := s.ids.newID(orderIDPrefix, now)
	if err != nil {
		return Order{}, err
	}
	o, err := NewOrder(merchantID, id, in, now)
	if err != nil {
		return Order{}, err
	}
	err = s.inTx(ctx, func(ctx context.Context) error {
		if err := s.store.CreateOrder(ctx, o); err != nil {
			return err
		}
		return s.emit(ctx, merchantID, EventOrderCreated, orderEvent{
			ID: o.ID, CustomerID: o.CustomerID, Currency: o.Currency, AmountTotal: o.AmountTotal, Status: string(o.Status),
		}, now)
	})
	if err != nil {
		return Order{}, fmt.Errorf("create order: %w", err)
	}
	return o, nil
}

// GetOrder returns the merchant's order with this id. It returns an error
// wrapping ErrNotFound (also for another merchant's order) or
// database.ErrUnavailable.
func (s *Service) GetOrder(ctx context.Context, merchantID, id string) (Order, error) {
	o, err := s.store.GetOrder(ctx, merchantID, id)
	if err != nil {
		return Order{}, fmt.Errorf("get order %s: %w", id, err)
	}
	return o, nil
}

// ListQuery asks for one page of a merchant's orders, newest first.
type ListQuery struct {
	// Limit is the page size, 1 to MaxListLimit; zero means DefaultListLimit.
	Limit int
	// StartingAfter is the id of the last order of the previous page; the
	// page starts with the next older order. It must name an order of the
	// merchant.
	StartingAfter string
	// CustomerID, when set, keeps only that customer's orders.
	CustomerID string
}

// ListOrders returns one page of the merchant's orders, newest first, and
// whether older orders follow. It returns a *ValidationError for a limit out
// of range or a starting_after that names no order of the merchant, or an
// error wrapping database.ErrUnavailable.
func (s *Service) ListOrders(ctx context.Context, merchantID string, q ListQuery) ([]Order, bool, error) {
	var fe fieldErrors
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 1 || limit > MaxListLimit:
		fe.add("limit", fmt.Sprintf("must be between 1 and %d", MaxListLimit))
	}
	// Ids and customer ids are visible ASCII. Anything else (NUL, invalid
	// UTF-8) matches no order, and PostgreSQL would refuse to compare it.
	if !visibleASCII(q.StartingAfter) {
		fe.add("starting_after", "must be the id of one of your orders")
	}
	if len(q.CustomerID) > MaxCustomerIDLength || !visibleASCII(q.CustomerID) {
		fe.add("customer_id", fmt.Sprintf("must be at most %d visible ASCII characters", MaxCustomerIDLength))
	}
	if err := fe.err(); err != nil {
		return nil, false, err
	}

	if q.StartingAfter != "" {
		// An unknown cursor is the client's mistake (a typo, another
		// merchant's id); answering an empty page would hide it.
		_, err := s.store.GetOrder(ctx, merchantID, q.StartingAfter)
		if errors.Is(err, ErrNotFound) {
			fe.add("starting_after", "must be the id of one of your orders")
			return nil, false, fe.err()
		}
		if err != nil {
			return nil, false, fmt.Errorf("list orders: %w", err)
		}
	}

	// One row more than the page tells whether another page follows,
	// without a COUNT.
	orders, err := s.store.ListOrders(ctx, merchantID, OrderFilter{
		Limit:      limit + 1,
		BeforeID:   q.StartingAfter,
		CustomerID: q.CustomerID,
	})
	if err != nil {
		return nil, false, fmt.Errorf("list orders: %w", err)
	}
	hasMore := len(orders) > limit
	if hasMore {
		orders = orders[:limit]
	}
	return orders, hasMore, nil
}

// inTx runs fn in a transaction when the service has one to offer (the
// payments store), joining the caller's if ctx carries one; the order and
// its outbox event then commit together.
func (s *Service) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if s.pay == nil {
		return fn(ctx)
	}
	return s.pay.InTx(ctx, fn)
}

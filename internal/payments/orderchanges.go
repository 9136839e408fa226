package payments

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Changing an order after it was created comes in two shapes, and the
// difference decides whether the operation needs an idempotency key at all:
//
//   - SetShippingAddress states the desired state ("the address is this").
//     Running it twice leaves what running it once left, so a client may
//     retry it blindly, with no key: the request is its own idempotency.
//   - AddOrderItem is cumulative ("one more of these"). Running it twice adds
//     two lines, so a retry is only safe under an Idempotency-Key; the HTTP
//     layer runs it behind the Atomic middleware, in the transaction that
//     ctx carries.
//
// Both are guarded by the order's version, which every change bumps with a
// conditional UPDATE: a client that read version 3 (the ETag) and sends
// If-Match: "3" changes the order only if nobody changed it in between, and
// of two writers that read the same version exactly one wins.

// ErrVersionMismatch: the order is not at a version the caller's
// Precondition accepts, because someone changed it since the caller read
// it. Nothing was changed; read the order again and decide again.
var ErrVersionMismatch = errors.New("the order has changed since the version given")

// errNoOrderChanges guards a Service whose Store cannot change orders.
var errNoOrderChanges = errors.New("this store cannot change orders")

// Precondition is what the caller expects of an order's version before a
// change applies: HTTP If-Match, parsed by the HTTP layer. The zero value
// (no If-Match, or If-Match: *) accepts any version, and the change applies
// to whatever is stored, still atomically.
type Precondition struct {
	// Required says that the caller named versions; the change then applies
	// only at one of Versions. Required with no Versions accepts nothing
	// (an If-Match holding only weak or foreign tags).
	Required bool
	// Versions are the versions the caller accepts.
	Versions []int64
}

// IfVersion is the Precondition "only at version v".
func IfVersion(v int64) Precondition {
	return Precondition{Required: true, Versions: []int64{v}}
}

// allows reports whether an order at version v meets the precondition.
func (p Precondition) allows(v int64) bool {
	return !p.Required || slices.Contains(p.Versions, v)
}

// Limits of a shipping address. A postal code is at most 10 characters
// anywhere today; 20 leaves room without inviting free text.
const (
	MaxAddressTextLength = 255
	MaxPostalCodeLength  = 20
)

// ShippingAddress is where an order is shipped. Every field is plain text;
// Line2 and PostalCode may be empty (not every country has postal codes).
// It is comparable, so "the same address" is ==.
type ShippingAddress struct {
	Name       string
	Line1      string
	Line2      string
	City       string
	PostalCode string
	// Country is an ISO 3166-1 alpha-2 code in upper case ("BR").
	Country string
}

// Validate checks every field and returns nil or a *ValidationError listing
// all refused fields, in field order.
func (a ShippingAddress) Validate() error {
	var fe fieldErrors
	checkText(&fe, "name", a.Name, MaxAddressTextLength, true)
	checkText(&fe, "line1", a.Line1, MaxAddressTextLength, true)
	checkText(&fe, "line2", a.Line2, MaxAddressTextLength, false)
	checkText(&fe, "city", a.City, MaxAddressTextLength, true)
	checkText(&fe, "postal_code", a.PostalCode, MaxPostalCodeLength, false)
	switch {
	case a.Country == "":
		fe.add("country", "is required")
	case len(a.Country) != 2 || !upperCaseLetters(a.Country):
		fe.add("country", "must be a two-letter upper-case ISO 3166-1 alpha-2 code")
	case !countries[a.Country]:
		fe.add("country", "is not an ISO 3166-1 alpha-2 country code")
	}
	return fe.err()
}

func upperCaseLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// SetShippingAddress makes addr the order's shipping address and returns the
// order as it is afterwards.
//
// It is desired state, so it is idempotent by itself: an order that already
// has this address is returned unchanged, its version included (a repeat
// must not look like a change to anyone holding the ETag), and that holds
// even after the order is paid. Otherwise the address may change until the
// order is paid: the amount does not depend on it, so a payment in flight
// does not stop it, but a paid order keeps the address it was paid for.
//
// The write is one UPDATE, conditional on the order being pending payment
// and, when pre names versions, on the version read here: of two concurrent
// writers that saw the same version, the database lets exactly one through.
// Without a precondition the UPDATE applies to whatever version is stored:
// the address is replaced whole, so nothing read here is written back and
// no other change can be lost.
//
// It returns a *ValidationError, or an error wrapping ErrNotFound,
// ErrVersionMismatch, ErrOrderAlreadyPaid or database.ErrUnavailable.
func (s *Service) SetShippingAddress(ctx context.Context, merchantID, orderID string, addr ShippingAddress, pre Precondition) (Order, error) {
	if err := addr.Validate(); err != nil {
		return Order{}, err
	}
	changes, err := s.orderChanges()
	if err != nil {
		return Order{}, err
	}
	o, err := s.store.GetOrder(ctx, merchantID, orderID)
	if err != nil {
		return Order{}, fmt.Errorf("set shipping address of %s: %w", orderID, err)
	}
	// The precondition comes first (RFC 9110 §13.2.2): a client whose view
	// is stale learns so even when its request would change nothing.
	if !pre.allows(o.Version) {
		return Order{}, fmt.Errorf("set shipping address of %s (at version %d): %w", orderID, o.Version, ErrVersionMismatch)
	}
	if o.ShippingAddress != nil && *o.ShippingAddress == addr {
		return o, nil
	}
	if o.Status != OrderPendingPayment {
		return Order{}, fmt.Errorf("set shipping address of %s: %w", orderID, ErrOrderAlreadyPaid)
	}
	var version int64 // zero: whatever version is stored
	if pre.Required {
		version = o.Version
	}
	updated, ok, err := changes.SetShippingAddress(ctx, merchantID, orderID, addr, version, s.now())
	if err != nil {
		return Order{}, fmt.Errorf("set shipping address of %s: %w", orderID, err)
	}
	if !ok {
		// Someone changed the order between the read above and the UPDATE.
		return Order{}, fmt.Errorf("set shipping address of %s: %w", orderID, s.whyUnchanged(ctx, merchantID, orderID))
	}
	return updated, nil
}

// whyUnchanged names the condition that stopped a conditional UPDATE, from
// a fresh read: the order is gone, paid, or at another version.
func (s *Service) whyUnchanged(ctx context.Context, merchantID, orderID string) error {
	o, err := s.store.GetOrder(ctx, merchantID, orderID)
	switch {
	case err != nil:
		return err
	case o.Status != OrderPendingPayment:
		return ErrOrderAlreadyPaid
	default:
		return ErrVersionMismatch
	}
}

// AddOrderItem appends one line to the order, recomputes its total, and
// returns the order as it is afterwards. Each call adds a line, so a retry
// is safe only under an idempotency key (the HTTP layer's Atomic
// middleware, whose transaction ctx carries and this joins).
//
// A payment takes the order's total in its first phase, and the order must
// not grow after that: the item is refused while a payment is pending,
// processing or succeeded, and once the order is paid. To be sure of "no
// payment" at the moment of the write, this first locks the order's row, as
// the payment's first phase does: a payment that took the total before us
// has then committed and is seen; one that comes after waits and takes the
// new total. (Without the lock, PostgreSQL would check for payments with a
// snapshot taken before the payment committed, and let the item in.) The
// write itself is one UPDATE conditional on the version read under the
// lock, the status, and the absence of an active payment.
//
// It returns a *ValidationError (the item, or an order that would exceed
// MaxItems or MaxAmountTotal), or an error wrapping ErrNotFound,
// ErrVersionMismatch, ErrOrderAlreadyPaid, ErrPaymentInProgress or
// database.ErrUnavailable.
func (s *Service) AddOrderItem(ctx context.Context, merchantID, orderID string, it Item, pre Precondition) (Order, error) {
	var fe fieldErrors
	checkItem(&fe, -1, it)
	if err := fe.err(); err != nil {
		return Order{}, err
	}
	changes, err := s.orderChanges()
	if err != nil {
		return Order{}, err
	}
	var updated Order
	err = changes.InTx(ctx, func(ctx context.Context) error {
		o, err := changes.LockOrder(ctx, merchantID, orderID)
		if err != nil {
			return err
		}
		if !pre.allows(o.Version) {
			return fmt.Errorf("at version %d: %w", o.Version, ErrVersionMismatch)
		}
		if o.Status != OrderPendingPayment {
			return ErrOrderAlreadyPaid
		}
		items := append(slices.Clone(o.Items), it)
		var fe fieldErrors
		switch {
		case len(items) > MaxItems:
			fe.add("items", fmt.Sprintf("the order already has the most items, %d", MaxItems))
		case total(items) > MaxAmountTotal: // bounded lines: no overflow
			fe.add("items", fmt.Sprintf("the order total must be at most %d", int64(MaxAmountTotal)))
		}
		if err := fe.err(); err != nil {
			return err
		}
		next, ok, err := changes.SetItems(ctx, merchantID, orderID, items, total(items), o.Version, s.now())
		if err != nil {
			return err
		}
		if !ok {
			// Under the row lock the version and status are as read, so
			// only a payment in flight can have stopped the UPDATE: a
			// conflict that clears when it settles.
			return ErrPaymentInProgress
		}
		updated = next
		return nil
	})
	if err != nil {
		return Order{}, fmt.Errorf("add item to order %s: %w", orderID, err)
	}
	return updated, nil
}

// orderChanges returns the Store's OrderChangeStore side.
func (s *Service) orderChanges() (OrderChangeStore, error) {
	cs, ok := s.store.(OrderChangeStore)
	if !ok {
		return nil, errNoOrderChanges
	}
	return cs, nil
}

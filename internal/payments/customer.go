package payments

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Customers: one per email per merchant. The email is the natural key, so
// creating a customer can clash with an existing one; that clash is a
// business answer (ErrCustomerExists), told by the database's unique
// constraint, never by a read before the insert, which two concurrent
// requests would both pass.

const customerIDPrefix = "cus_"

// Limits of a customer.
const (
	MaxEmailLength        = 254 // RFC 5321's path limit, less the brackets
	MaxCustomerNameLength = 255
)

// ErrCustomerExists: the merchant already has a customer with this email.
var ErrCustomerExists = errors.New("a customer with this email exists")

// Customer is a merchant's customer.
type Customer struct {
	ID         string
	MerchantID string
	// Email is normalized (NormalizeEmail): compared case-insensitively,
	// and the same on both dialects because Go, not the database, folds it.
	Email     string
	Name      string
	CreatedAt time.Time
}

// NewCustomerInput is what a client sends to create a customer.
type NewCustomerInput struct {
	Email string
	Name  string
}

// NormalizeEmail is the form an email is stored and compared in: in lower
// case. Folding in Go rather than with the database's lower() keeps
// PostgreSQL and SQLite (whose lower() knows only ASCII) in agreement on
// every address. Nothing is trimmed: an address is taken as sent, and one
// with spaces around it is refused (PatternEmail), as the OpenAPI document
// says.
func NormalizeEmail(s string) string { return strings.ToLower(s) }

// Validate checks the input's shape and returns nil or a *ValidationError
// listing every refused field.
func (in NewCustomerInput) Validate() error {
	var fe fieldErrors
	switch {
	case in.Email == "":
		fe.add("email", "is required")
	case !utf8.ValidString(in.Email) || utf8.RuneCountInString(in.Email) > MaxEmailLength:
		fe.add("email", fmt.Sprintf("must be a valid email address of at most %d characters", MaxEmailLength))
	case !emailRE.MatchString(in.Email):
		fe.add("email", "must be an email address like ada@example.com, without spaces")
	}
	checkText(&fe, "name", in.Name, MaxCustomerNameLength, true)
	return fe.err()
}

// CustomerStore keeps customers (paymentsdb.Store implements it). Errors as for
// Store, plus those listed.
type CustomerStore interface {
	// CreateCustomer inserts c in one statement. It returns
	// ErrCustomerExists when the merchant has a customer with c.Email.
	CreateCustomer(ctx context.Context, c Customer) error
	// GetCustomer returns the merchant's customer. It returns ErrNotFound.
	GetCustomer(ctx context.Context, merchantID, id string) (Customer, error)
}

// WithCustomers turns on the customer use cases.
func WithCustomers(store CustomerStore) Option {
	return func(s *Service) { s.customers = store }
}

var errNoCustomers = errors.New("customers are not configured on this service")

// CreateCustomer validates in and stores a new customer, with its
// customer.created outbox event, inside the transaction carried by ctx when
// there is one. It returns a *ValidationError, an error wrapping
// ErrCustomerExists, or one wrapping database.ErrUnavailable.
func (s *Service) CreateCustomer(ctx context.Context, merchantID string, in NewCustomerInput) (Customer, error) {
	if s.customers == nil {
		return Customer{}, errNoCustomers
	}
	if err := in.Validate(); err != nil {
		return Customer{}, err
	}
	now := s.now()
	id, err := s.ids.newID(customerIDPrefix, now)
	if err != nil {
		return Customer{}, err
	}
	c := Customer{ID: id, MerchantID: merchantID, Email: NormalizeEmail(in.Email), Name: in.Name, CreatedAt: now}
	err = s.inTx(ctx, func(ctx context.Context) error {
		if err := s.customers.CreateCustomer(ctx, c); err != nil {
			return err
		}
		return s.emit(ctx, merchantID, EventCustomerCreated, customerEvent{ID: c.ID, Email: c.Email}, now)
	})
	if err != nil {
		return Customer{}, fmt.Errorf("create customer: %w", err)
	}
	return c, nil
}

// GetCustomer returns the merchant's customer. It returns an error wrapping
// ErrNotFound (also for another merchant's customer) or
// database.ErrUnavailable.
func (s *Service) GetCustomer(ctx context.Context, merchantID, id string) (Customer, error) {
	if s.customers == nil {
		return Customer{}, errNoCustomers
	}
	c, err := s.customers.GetCustomer(ctx, merchantID, id)
	if err != nil {
		return Customer{}, fmt.Errorf("get customer %s: %w", id, err)
	}
	return c, nil
}

package payments

import (
	"errors"
	"fmt"
	"strings"
)

// Errors the Service returns, wrapped with %w and context. Database outages
// arrive as database.ErrUnavailable, also wrapped.
var (
	// ErrNotFound: no such resource for this merchant. Another merchant's
	// resource is not found either, so ids do not leak across merchants.
	ErrNotFound = errors.New("not found")
	// ErrValidation: the input breaks a rule; *ValidationError, which wraps
	// it, says which fields.
	ErrValidation = errors.New("validation failed")
)

// FieldError is one refused field of an input.
type FieldError struct {
	// Field is the path of the field as the API names it: customer_id,
	// items[0].quantity, metadata.color.
	Field string
	// Message says what a valid value looks like.
	Message string
}

// ValidationError lists every refused field of one input, so that a client
// fixes them all in one round trip. It wraps ErrValidation.
type ValidationError struct {
	Fields []FieldError
}

// Error lists the refused fields on one line, for logs.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + " " + f.Message
	}
	return fmt.Sprintf("%s: %s", ErrValidation, strings.Join(parts, "; "))
}

// Unwrap lets errors.Is(err, ErrValidation) see through the field list.
func (e *ValidationError) Unwrap() error { return ErrValidation }

// fieldErrors collects refused fields while an input is checked.
type fieldErrors []FieldError

func (fe *fieldErrors) add(field, message string) {
	*fe = append(*fe, FieldError{Field: field, Message: message})
}

// err returns nil when nothing was refused, else the *ValidationError.
func (fe fieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	return &ValidationError{Fields: fe}
}

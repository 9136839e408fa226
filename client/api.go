package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// CreateOrder creates an order: POST /v1/orders. It is one operation under
// one key, however many attempts it takes; a retry after a lost answer gets
// the same order back (Replayed), never a second one.
//
// Errors: an *APIError (ErrValidation, ErrKeyReused, ErrUnauthorized, ...),
// a network error after the last attempt, or the context's error.
func (c *Client) CreateOrder(ctx context.Context, params CreateOrderParams, opts ...CallOption) (*Order, error) {
	r, err := newPost("/v1/orders", params, false, opts)
	if err != nil {
		return nil, err
	}
	return call[Order](ctx, c, r)
}

// GetOrder reads an order: GET /v1/orders/{id}.
//
// Errors: an *APIError (ErrNotFound, also for another merchant's order), a
// network error after the last attempt, or the context's error.
func (c *Client) GetOrder(ctx context.Context, id string) (*Order, error) {
	return call[Order](ctx, c, newGet("/v1/orders/"+url.PathEscape(id)))
}

// PayOrder charges the order's total with params.PaymentMethod: POST
// /v1/orders/{id}/payments.
//
// It returns the succeeded payment, charged exactly once however many
// attempts it took. A 202 (the provider's outcome unknown) is retried under
// the same key until the server answers the final outcome; if the attempts
// or the context run out first, it returns the processing payment and an
// error matching ErrStillProcessing.
//
// Errors: an *APIError matching ErrPaymentDeclined (final; its PaymentID and
// DeclineCode say which payment and why), ErrOrderAlreadyPaid,
// ErrNotFound, ErrValidation, ErrKeyReused, ...; ErrStillProcessing (with
// the payment); a network error after the last attempt, or the context's
// error.
func (c *Client) PayOrder(ctx context.Context, orderID string, params PayParams, opts ...CallOption) (*Payment, error) {
	r, err := newPost("/v1/orders/"+url.PathEscape(orderID)+"/payments", params, true, opts)
	if err != nil {
		return nil, err
	}
	return call[Payment](ctx, c, r)
}

// GetPayment reads a payment: GET /v1/payments/{id}. It is how to follow a
// payment returned with ErrStillProcessing.
//
// Errors: an *APIError (ErrNotFound), a network error after the last
// attempt, or the context's error.
func (c *Client) GetPayment(ctx context.Context, id string) (*Payment, error) {
	return call[Payment](ctx, c, newGet("/v1/payments/"+url.PathEscape(id)))
}

// GetRefund reads a refund: GET /v1/refunds/{id} (a 502 of RefundPayment
// names its RefundID). Errors as for GetPayment.
func (c *Client) GetRefund(ctx context.Context, id string) (*Refund, error) {
	return call[Refund](ctx, c, newGet("/v1/refunds/"+url.PathEscape(id)))
}

// RefundPayment refunds params.Amount of a succeeded payment (zero: all that
// is left): POST /v1/payments/{id}/refunds. Like PayOrder, a 202 is retried
// under the same key, and a refund still processing when the attempts or the
// context run out is returned with ErrStillProcessing. A refund the provider
// refused is a final answer, not an error: its Status is StatusFailed.
//
// Errors: an *APIError (ErrRefundExceedsPayment, ErrNotFound, ErrValidation,
// ErrKeyReused, ...); ErrStillProcessing (with the refund); a network error
// after the last attempt, or the context's error.
func (c *Client) RefundPayment(ctx context.Context, paymentID string, params RefundParams, opts ...CallOption) (*Refund, error) {
	r, err := newPost("/v1/payments/"+url.PathEscape(paymentID)+"/refunds", params, true, opts)
	if err != nil {
		return nil, err
	}
	return call[Refund](ctx, c, r)
}

// newPost prepares a POST: the body is encoded once and the key is made
// once, here, before any attempt; every retry sends both unchanged.
func newPost(path string, params any, pendingOK bool, opts []CallOption) (*request, error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.key == "" {
		o.key = NewIdempotencyKey()
	}
	body, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("%s %s: encode body: %w", http.MethodPost, path, err)
	}
	return &request{method: http.MethodPost, path: path, body: body, key: o.key, pendingOK: pendingOK}, nil
}

func newGet(path string) *request {
	return &request{method: http.MethodGet, path: path}
}

// call runs r and decodes its answer into a T, with the Meta filled in. It
// returns a T together with an error only for ErrStillProcessing.
func call[T any, PT interface {
	*T
	meta() *Meta
}](ctx context.Context, c *Client, r *request) (*T, error) {
	out, err := c.do(ctx, r)
	if out.ans == nil {
		return nil, err
	}
	v := PT(new(T))
	if jerr := json.Unmarshal(out.ans.body, v); jerr != nil {
		return nil, errors.Join(err, fmt.Errorf("%s %s: %w (status %d): %w", r.method, r.path, errDecode, out.ans.status, jerr))
	}
	m := v.meta()
	m.Replayed, m.IdempotencyKey, m.Attempts = out.ans.replayed, r.key, out.attempts
	return (*T)(v), err
}

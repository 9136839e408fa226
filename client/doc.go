// Package client is a Go client for the payments API that retries safely.
//
// It is written to be read: it shows what a client must do for the server's
// idempotency keys to protect anything. A server can only refuse to run an
// operation twice if every retry of it arrives under the key of the first
// attempt.
//
//	c := client.New("http://127.0.0.1:8080", "sk_test_acme")
//	order, err := c.CreateOrder(ctx, client.CreateOrderParams{
//		CustomerID: "cus_1", Currency: "BRL",
//		Items: []client.OrderItem{{SKU: "SKU-1", Name: "Coffee", Quantity: 2, UnitAmount: 1250}},
//	})
//	...
//	payment, err := c.PayOrder(ctx, order.ID, client.PayParams{PaymentMethod: "pm_card_visa"})
//	switch {
//	case err == nil:
//		// payment.Status is "succeeded": charged exactly once.
//	case errors.Is(err, client.ErrPaymentDeclined):
//		// Final. The order can be paid again with another method: that is a
//		// new operation, so a new call (and a new key).
//	case errors.Is(err, client.ErrStillProcessing):
//		// payment is the processing payment. The server resolves it on its
//		// own; read it later with GetPayment, or call PayOrder again with the
//		// same key (WithIdempotencyKey(payment.IdempotencyKey)).
//	default:
//		// Unknown: the charge may or may not have happened. Only a retry
//		// under the same key is safe; see "Keys that outlive a call" below.
//	}
//
// # One key per logical operation
//
// Each POST method (CreateOrder, PayOrder, RefundPayment) is one logical
// operation. Its Idempotency-Key is made once, when the method is called,
// before the first attempt, and every retry of that call sends it again with
// the same body bytes. It is never made inside the retry loop: a client that
// makes a new key per attempt turns every lost answer into a second order or
// a second charge, and the server cannot tell (docs/guide/without-a-key.md
// measures exactly that).
//
// The key the call used is on the result (Order.IdempotencyKey and so on)
// and on an *APIError.
//
// # Keys that outlive a call
//
// A key made inside a call dies with the call. If the operation must survive
// a give-up, a crash or a restart of your process (a checkout that a user
// may resubmit, a job that may run again), make the key when the operation
// is decided, store it with the operation (in your database, beside the cart
// or the job), and pass it on every call:
//
//	key := client.NewIdempotencyKey() // stored with the checkout
//	payment, err := c.PayOrder(ctx, orderID, params, client.WithIdempotencyKey(key))
//
// Calling again later with the same key and the same parameters continues the
// same operation: the server replays the stored answer (Replayed is true), or
// waits for the original, or resumes it where it stopped. The same key with
// different parameters is ErrKeyReused, never a silent second operation.
//
// # What is retried
//
// A call makes up to DefaultMaxAttempts requests (WithMaxAttempts changes
// it). It tries again, with the same key, after:
//
//   - a network error or an attempt that ran out of time (WithAttemptTimeout):
//     the request may have been served and only the answer lost, which is
//     precisely the case the key is for;
//   - 409 idempotency_request_in_progress: the original attempt is still
//     running on the server; the retry gets its result;
//   - 409 payment_in_progress: the order or payment has a payment or refund
//     in flight; the server did nothing and stored nothing, so the same key
//     after Retry-After runs again (and, once the other payment settled,
//     gets the final answer: order_already_paid, or a success);
//   - 429 rate_limited, 502 provider_unavailable (nothing was charged; the
//     retry resumes the same payment), 503 service_unavailable, and the other
//     5xx answers: the server says "retry later with the same key";
//   - 202 Accepted from PayOrder or RefundPayment: the provider's outcome is
//     not known yet. This is not an error. The retry asks again under the
//     same key, and the server answers 202 until it knows, then the final
//     201 or 402. If the attempts run out first, the call returns the
//     processing payment (or refund) together with ErrStillProcessing.
//
// It never retries the answers that are final for this key: 400 (validation,
// a missing or invalid key), 401, 402 payment_declined, 404, 409
// order_already_paid, refund_exceeds_payment, customer_exists,
// payment_canceled and refund_canceled, 412, 413, and 422
// idempotency_key_reused. payment_canceled (refund_canceled) says the key's
// payment never reached the provider and was canceled after
// PENDING_CANCEL_AFTER: paying again is a new operation, so call PayOrder
// again, which makes a new key; never resend the old one. Retrying those would get the same answer, or a
// replay of it. They come back as an *APIError, which errors.Is matches
// against the sentinel of its code (ErrPaymentDeclined, ErrKeyReused, ...).
//
// # How long it waits
//
// Before retry n it waits a random time between zero and base·2^(n-1),
// capped at a maximum (WithBackoff; "full jitter"), so that many clients
// failing together do not come back together. When the answer
// carries Retry-After it waits exactly that long instead: the server knows
// better (the original's remaining time, the rate-limit window). Cancelling
// the context stops the call at once, during an attempt or a wait; a call
// cut short while its payment was processing returns the payment and an
// error matching both ErrStillProcessing and the context's error.
//
// GET methods are retried on the same conditions; they need no key.
//
// A Client is safe for concurrent use.
package client

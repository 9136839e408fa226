package handlers

import (
	"net/http"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/problem"
)

// keptConflicts are the 409s that are final outcomes of an operation, stored
// and replayed like a success. Any other 409 gives the key back: the
// idempotency layer's own (idempotency_request_in_progress,
// idempotency_key_expired) and payment_in_progress, a conflict with a
// payment or refund in flight that clears when it settles, so that the same
// key sent again after Retry-After runs again and may then succeed.
var keptConflicts = map[string]bool{
	problem.CodeOrderAlreadyPaid:     true,
	problem.CodeRefundExceedsPayment: true,
	problem.CodeCustomerExists:       true,
	problem.CodePaymentCanceled:      true,
	problem.CodeRefundCanceled:       true,
}

// KeptConflict reports whether a 409 with this problem code is stored and
// replayed. Tools that audit the contract (tools/chaos) ask here rather
// than keep a list of their own.
func KeptConflict(code string) bool { return keptConflicts[code] }

// Keep is the one place that decides which answers of this API are stored
// under their Idempotency-Key and replayed (idempotency.Config.Keep): every
// success but a 202 (the layer's default), a decline (402), and the final
// business conflicts in keptConflicts, told apart by their problem code
// (the status alone cannot tell order_already_paid from payment_in_progress).
// Everything else (validation errors, 404, 5xx, 502, temporary conflicts) is
// not stored, so the client may send the key again.
func Keep(r idempotency.Response) bool {
	switch {
	case idempotency.KeepSuccess(r):
		return true
	case r.Status == http.StatusPaymentRequired:
		return true
	case r.Status == http.StatusConflict:
		return keptConflicts[idempotency.ProblemCode(r)]
	}
	return false
}

package handlers

import (
	"net/http"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/problem"
)

// keptConflicts are the 409s that are final outcomes of an operation, stored
// and replayed like a success. Any other 409 (the idempotency layer's own, a
// conflict that may clear) gives the key back.
var keptConflicts = map[string]bool{
	problem.CodeOrderAlreadyPaid:     true,
	problem.CodeRefundExceedsPayment: true,
	problem.CodeCustomerExists:       true,
}

// Keep is the one place that decides which answers of this API are stored
// under their Idempotency-Key and replayed (idempotency.Config.Keep): every
// success but a 202 (the layer's default), a decline (402), and the final
// business conflicts in keptConflicts, told apart by their problem code.
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

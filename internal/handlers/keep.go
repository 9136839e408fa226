package handlers

import (
	"net/http"

	"github.com/idemkeys/payments/internal/answers"
)

// KeptConflict reports whether a 409 with this problem code is final:
// stored under its key and replayed, as the error table's kept column says
// (an outcome's problem, a canceled payment or refund, always is).
// Tools that audit the contract (tools/chaos) ask here rather than keep a
// list of their own.
func KeptConflict(code string) bool {
	for _, r := range errorTable {
		if r.status == http.StatusConflict && r.code == code {
			return r.kept
		}
	}
	for _, o := range answers.OutcomeProblems() {
		if o.Status == http.StatusConflict && o.Code == code {
			return true
		}
	}
	return false
}

package handlers

import (
	"net/http"
	"slices"

	"github.com/idemkeys/payments/internal/answers"
)

// problemKinds is every problem the API answers with, for the audits that
// list them: the error table's rows, the 500 of an unknown error, then the
// outcomes' problems (a decline, a cancel: answers.OutcomeProblems), which
// are always kept. Built once.
var problemKinds = func() []errorRow {
	rows := append(slices.Clone(errorTable), internalError)
	for _, o := range answers.OutcomeProblems() {
		rows = append(rows, errorRow{status: o.Status, code: o.Code, title: o.Title, kept: true})
	}
	return rows
}()

// KeptConflict reports whether a 409 with this problem code is final:
// stored under its key and replayed, as the kept column of problemKinds
// says. Tools that audit the contract (tools/chaos) ask here rather than
// keep a list of their own.
func KeptConflict(code string) bool {
	for _, r := range problemKinds {
		if r.status == http.StatusConflict && r.code == code {
			return r.kept
		}
	}
	return false
}

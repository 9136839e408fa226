package handlers

import "github.com/idemkeys/payments/internal/answers"

// TableRow is one row of the error table as the reference tests see it.
type TableRow struct {
	Status int
	Code   string
	Kept   bool
}

// ErrorTableForTest lists the error table's rows, the 500 of an unknown
// error included, in order, then the problems of the outcomes (a decline,
// a cancel), which are always kept: every problem the API answers with.
func ErrorTableForTest() []TableRow {
	outcomes := answers.OutcomeProblems()
	rows := make([]TableRow, 0, len(errorTable)+1+len(outcomes))
	for _, r := range append(errorTable, internalError) {
		rows = append(rows, TableRow{Status: r.status, Code: r.code, Kept: r.kept})
	}
	for _, o := range outcomes {
		rows = append(rows, TableRow{Status: o.Status, Code: o.Code, Kept: true})
	}
	return rows
}

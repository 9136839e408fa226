package handlers

// TableRow is one row of the error table as the reference tests see it.
type TableRow struct {
	Status int
	Code   string
	Kept   bool
}

// ErrorTableForTest lists every problem the API answers with
// (problemKinds): the error table's rows, the 500 of an unknown error
// included, in order, then the outcomes' problems.
func ErrorTableForTest() []TableRow {
	rows := make([]TableRow, 0, len(problemKinds))
	for _, r := range problemKinds {
		rows = append(rows, TableRow{Status: r.status, Code: r.code, Kept: r.kept})
	}
	return rows
}

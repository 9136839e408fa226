package handlers

// TableRow is one row of the error table as the reference tests see it.
type TableRow struct {
	Status int
	Code   string
	Kept   bool
}

// ErrorTableForTest lists the error table's rows, the 500 of an unknown
// error included, in order.
func ErrorTableForTest() []TableRow {
	rows := make([]TableRow, 0, len(errorTable)+1)
	for _, r := range append(errorTable, internalError) {
		rows = append(rows, TableRow{Status: r.status, Code: r.code, Kept: r.kept})
	}
	return rows
}

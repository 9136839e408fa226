// Package testkit is the one place tests get what they run against: a
// database of their own (a PostgreSQL schema or an SQLite file, migrated and
// dropped when the test ends) and a clock the test moves by hand.
//
// Nothing here is a test double: the databases are real PostgreSQL and
// SQLite.
//
// A service a test needs but cannot reach skips the test with a line
// starting "SKIPPED:", except under CI=true, where it fails the test
// (MissingService).
package testkit

// Package testkit is the one place tests get what they run against: a
// database of their own (a PostgreSQL schema or an SQLite file, migrated and
// dropped when the test ends), a private redis-server (or a three-node
// cluster), the project's binaries built and run as processes on free
// loopback ports, and a clock the test moves by hand. The tools (chaos,
// bench) build their processes from the same Process.
//
// Nothing here is a test double. The databases are real PostgreSQL and
// SQLite, the processes are the ones a deployment runs, and killing one is a
// real SIGKILL.
//
// A service a test needs but cannot reach (PostgreSQL, redis-server) skips
// the test with a line starting "SKIPPED:", except under CI=true, where it
// fails the test (MissingService).
package testkit

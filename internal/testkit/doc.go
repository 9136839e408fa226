// Package testkit is the one place tests get what they run against: a
// database of their own (a PostgreSQL schema or an SQLite file, migrated and
// dropped when the test ends), a private redis-server (or a three-node
// cluster), a private nats-server with JetStream, the project's binaries
// built and run as processes on free loopback ports, and a clock the test
// moves by hand. The tools (chaos, bench) build their processes from the
// same Process.
//
// Nothing here is a test double. The databases are real PostgreSQL and
// SQLite, the processes are the ones a deployment runs, and killing one is a
// real SIGKILL. The one stand-in, testkit/outside, is for a service outside
// the project that a fork's endpoint calls (as internal/provider is for the
// payment provider).
//
// A service a test needs but cannot reach (PostgreSQL, redis-server,
// nats-server, Chromium) skips the test with a line starting "SKIPPED:",
// except under CI=true, where it fails the test (MissingService).
//
// Tests come in two tiers. `go test -short ./...` runs the quick one: unit
// tests and tests against real PostgreSQL, SQLite and a private
// redis-server or nats-server. Tests that build binaries, start the
// project's processes or a Redis Cluster, run the chaos or bench harness, or
// drive a browser are
// the end-to-end tier: they call EndToEnd first, which skips them under
// -short, and Binaries, StartProcess and StartRedisCluster refuse to run in
// a test that did not.
package testkit

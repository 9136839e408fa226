//go:build !benchbaseline

package main

// withoutIdempotency is true only in the benchmark's baseline binary (built
// with -tags benchbaseline by cmd/bench). A binary built without that tag,
// every binary that serves traffic, cannot turn idempotency off.
const withoutIdempotency = false

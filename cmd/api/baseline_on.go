//go:build benchbaseline

package main

// withoutIdempotency replaces the Atomic middleware (POST /v1/orders and
// the item route) with a pass-through, so that cmd/bench can measure the
// very same program with and without the idempotency record in the order's
// commit. This file is compiled only with -tags benchbaseline; never serve
// traffic from such a binary.
const withoutIdempotency = true

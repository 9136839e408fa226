package main

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// The program's behaviour is tested through internal/app, which run
// dispatches to; here only what run adds: reading the configuration.
func TestBadConfigurationFailsAtStart(t *testing.T) {
	err := run(context.Background(), nil, []string{"IDEMPOTENCY_WAIT=soon"}, io.Discard)
	require.ErrorContains(t, err, "IDEMPOTENCY_WAIT")
}

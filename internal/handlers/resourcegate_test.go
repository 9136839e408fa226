package handlers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
)

// TestResourceGateBoundsOneResourceOnly: past its limit a resource's next
// write waits for a turn and is refused with ErrBusy when none comes;
// another resource is never held up; a turn given back lets the next in;
// a resource nobody uses takes no memory.
func TestResourceGateBoundsOneResourceOnly(t *testing.T) {
	g := newResourceGate(2, 50*time.Millisecond)
	ctx := context.Background()
	first, err := g.enter(ctx, "m\x00orders\x00ord_1")
	require.NoError(t, err)
	second, err := g.enter(ctx, "m\x00orders\x00ord_1")
	require.NoError(t, err)

	_, err = g.enter(ctx, "m\x00orders\x00ord_1")
	require.ErrorIs(t, err, database.ErrBusy, "a third write to the same order waits, then is refused")
	other, err := g.enter(ctx, "m\x00orders\x00ord_2")
	require.NoError(t, err, "another order is not held up")
	other()

	done := make(chan error, 1)
	go func() {
		leave, err := g.enter(ctx, "m\x00orders\x00ord_1")
		if err == nil {
			leave()
		}
		done <- err
	}()
	first()
	require.NoError(t, <-done, "a turn given back lets the next write in")
	second()
	require.Empty(t, g.slots, "no resource is remembered once nobody uses it")

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	a, _ := g.enter(ctx, "k")
	b, _ := g.enter(ctx, "k")
	_, err = g.enter(canceled, "k")
	require.ErrorIs(t, err, context.Canceled)
	a()
	b()
	require.Nil(t, newResourceGate(0, time.Second), "no bound: no gate")
}

package provider_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
)

// chaosOutcomes sends n first requests to running, one after the other so
// the random draws come in a fixed order, and returns each one's error kind.
func chaosOutcomes(t *testing.T, running *provider.Running, clientTimeout time.Duration, n int) []string {
	t.Helper()
	client := provider.NewClient(running.URL, provider.ClientOptions{
		Timeout: clientTimeout,
		Breaker: provider.BreakerSettings{Failures: 1000}, // chaos is the point here
	})
	kinds := make([]string, n)
	for i := range n {
		_, err := client.CreateCharge(t.Context(), fmt.Sprintf("key-%d", i), visa(fmt.Sprintf("pay_%d", i)))
		kinds[i] = errorKind(t, err)
	}
	return kinds
}

// chaosTwice runs chaosOutcomes against two providers with the same
// settings at once, checks that they met the same faults, and returns the
// first provider and its outcomes.
func chaosTwice(t *testing.T, cfg func() provider.Config, clientTimeout time.Duration, n int) (*provider.Running, []string) {
	t.Helper()
	running, twin := startProvider(t, cfg()), startProvider(t, cfg())
	var first, same []string
	t.Run("runs", func(t *testing.T) {
		t.Run("first", func(t *testing.T) {
			t.Parallel()
			first = chaosOutcomes(t, running, clientTimeout, n)
		})
		t.Run("again", func(t *testing.T) {
			t.Parallel()
			same = chaosOutcomes(t, twin, clientTimeout, n)
		})
	})
	require.Equal(t, first, same, "the same seed gives the same faults")
	return running, first
}

func count(kinds []string, kind string) int {
	n := 0
	for _, k := range kinds {
		if k == kind {
			n++
		}
	}
	return n
}

func TestChaos_Unavailable(t *testing.T) {
	cfg := func() provider.Config {
		return provider.Config{Chaos: provider.Chaos{UnavailableRate: 0.3}, Rand: rand.NewPCG(1, 2)}
	}
	running, kinds := chaosTwice(t, cfg, time.Minute, 100)
	require.InDelta(t, 30, count(kinds, "not_executed"), 15)
	require.Zero(t, count(kinds, "unknown"))

	// A 503 did nothing, and the retry under its key gets through.
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	for i, kind := range kinds {
		ref := fmt.Sprintf("pay_%d", i)
		if kind != "not_executed" {
			require.Len(t, running.Server.ChargesByReference(ref), 1)
			continue
		}
		require.Empty(t, running.Server.ChargesByReference(ref))
		_, err := client.CreateCharge(t.Context(), fmt.Sprintf("key-%d", i), visa(ref))
		require.NoError(t, err)
		require.Len(t, running.Server.ChargesByReference(ref), 1)
	}
}

func TestChaos_LostResponse(t *testing.T) {
	cfg := func() provider.Config {
		return provider.Config{Chaos: provider.Chaos{LostResponseRate: 0.3}, Rand: rand.NewPCG(3, 4)}
	}
	// Long enough that only a held answer runs out of it, even on a busy
	// machine.
	const timeout = 500 * time.Millisecond
	running, kinds := chaosTwice(t, cfg, timeout, 20)
	require.NotZero(t, count(kinds, "unknown"))
	require.NotZero(t, count(kinds, "definitive"))
	require.Zero(t, count(kinds, "not_executed"))

	// Lost or not, every request charged once; a retry answers at once.
	client := provider.NewClient(running.URL, provider.ClientOptions{Timeout: timeout})
	for i := range kinds {
		// A request the client gave up on may still be in the server's
		// hands on a busy machine: wait for it to land, then count.
		var charges []provider.Charge
		require.Eventually(t, func() bool {
			charges = running.Server.ChargesByReference(fmt.Sprintf("pay_%d", i))
			return len(charges) > 0
		}, 10*time.Second, 10*time.Millisecond, "request %d never charged", i)
		require.Len(t, charges, 1)
		retried, err := client.CreateCharge(t.Context(), fmt.Sprintf("key-%d", i), visa(fmt.Sprintf("pay_%d", i)))
		require.NoError(t, err)
		require.Equal(t, charges[0], retried)
	}
}

func TestChaos_Latency(t *testing.T) {
	const latency = 100 * time.Millisecond
	running := startProvider(t, provider.Config{Chaos: provider.Chaos{Latency: latency}, Rand: rand.NewPCG(5, 6)})
	client := provider.NewClient(running.URL, provider.ClientOptions{})

	var slowest time.Duration
	for i := range 20 {
		start := time.Now()
		_, err := client.CreateCharge(t.Context(), fmt.Sprintf("key-%d", i), visa("pay_latency"))
		require.NoError(t, err)
		slowest = max(slowest, time.Since(start))
	}
	require.Greater(t, slowest, latency/10, "some latency was added")
	require.Less(t, slowest, latency+time.Second, "no more than the setting, give or take the machine")
}

func TestChaos_StrikesOnlyFirstRequestsOfOrdinaryMethods(t *testing.T) {
	running := startProvider(t, provider.Config{
		Chaos:     provider.Chaos{UnavailableRate: 1},
		SlowDelay: time.Millisecond,
	})
	client := provider.NewClient(running.URL, provider.ClientOptions{Breaker: provider.BreakerSettings{Failures: 1000}})

	tests := []struct {
		method    string
		firstKind string
	}{
		{provider.MethodCardVisa, "not_executed"},
		{provider.MethodCardDeclined, "not_executed"},
		{provider.MethodFaultSlow, "definitive"},
		{provider.MethodFaultLostResponse, "definitive"}, // held only up to the client's patience below
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			req := withMethod(visa("pay_"+tt.method), tt.method)
			if tt.method == provider.MethodFaultLostResponse {
				impatient := provider.NewClient(running.URL, provider.ClientOptions{Timeout: 100 * time.Millisecond})
				_, err := impatient.CreateCharge(t.Context(), "first-"+tt.method, req)
				require.ErrorIs(t, err, provider.ErrUnknownOutcome, "its own fault, not chaos")
			} else {
				_, err := client.CreateCharge(t.Context(), "first-"+tt.method, req)
				require.Equal(t, tt.firstKind, errorKind(t, err))
			}
			_, err := client.CreateCharge(t.Context(), "first-"+tt.method, req)
			require.NoError(t, err, "the retry under the key gets through")
		})
	}

	t.Run("refunds", func(t *testing.T) {
		charge, err := client.CreateCharge(t.Context(), "first-"+provider.MethodCardVisa, visa("pay_"+provider.MethodCardVisa))
		require.NoError(t, err)
		req := provider.RefundRequest{Charge: charge.ID, Amount: 1, Reference: "re_chaos"}
		_, err = client.CreateRefund(t.Context(), "refund", req)
		require.ErrorIs(t, err, provider.ErrNotExecuted)
		require.Empty(t, running.Server.RefundsByReference("re_chaos"))
		refund, err := client.CreateRefund(t.Context(), "refund", req)
		require.NoError(t, err)
		require.Equal(t, provider.RefundSucceeded, refund.Status)
	})
}

package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/idemkeys/payments/internal/payments"
)

// Operations and outcomes of payment_provider_calls_total.
var (
	providerOps      = []string{"charge", "find_charge", "refund", "find_refund"}
	providerOutcomes = []string{"succeeded", "declined", "not_executed", "unknown", "no_such_call"}
)

// InstrumentProvider returns p measured: every call is counted by
// operation and outcome, and timed. Outcomes follow payments.Provider's
// three kinds of answer: a definitive result (succeeded, or declined for a
// declined charge or a failed refund), not_executed, unknown, and
// no_such_call for a lookup that found nothing.
func (m *Metrics) InstrumentProvider(p payments.Provider) payments.Provider {
	return &provider{next: p, m: m}
}

type provider struct {
	next payments.Provider
	m    *Metrics
}

func (p *provider) Charge(ctx context.Context, key string, req payments.ChargeRequest) (payments.ChargeResult, error) {
	start := time.Now()
	res, err := p.next.Charge(ctx, key, req)
	p.observe("charge", start, res.Succeeded, err)
	return res, err
}

func (p *provider) FindCharge(ctx context.Context, key string) (payments.ChargeResult, error) {
	start := time.Now()
	res, err := p.next.FindCharge(ctx, key)
	p.observe("find_charge", start, res.Succeeded, err)
	return res, err
}

func (p *provider) Refund(ctx context.Context, key string, req payments.RefundRequest) (payments.RefundResult, error) {
	start := time.Now()
	res, err := p.next.Refund(ctx, key, req)
	p.observe("refund", start, res.Succeeded, err)
	return res, err
}

func (p *provider) FindRefund(ctx context.Context, key string) (payments.RefundResult, error) {
	start := time.Now()
	res, err := p.next.FindRefund(ctx, key)
	p.observe("find_refund", start, res.Succeeded, err)
	return res, err
}

func (p *provider) observe(op string, start time.Time, succeeded bool, err error) {
	p.m.providerDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	p.m.providerCalls.WithLabelValues(op, providerOutcome(succeeded, err)).Inc()
}

func providerOutcome(succeeded bool, err error) string {
	switch {
	case err == nil && succeeded:
		return "succeeded"
	case err == nil:
		return "declined"
	case errors.Is(err, payments.ErrProviderNoSuchCall):
		return "no_such_call"
	case errors.Is(err, payments.ErrProviderNotExecuted):
		return "not_executed"
	default:
		// ErrProviderUnknown, and anything the port should not return:
		// the outcome is not known.
		return "unknown"
	}
}

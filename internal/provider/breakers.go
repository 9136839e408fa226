package provider

import (
	"context"
	"errors"
	"sync"

	"github.com/sony/gobreaker/v2"
)

// merchantKey is the context key WithMerchant stores under.
type merchantKey struct{}

// WithMerchant returns ctx naming the merchant a call is made for: the
// Client counts the call's failures against that merchant's breaker only.
// A call whose context names no merchant (a lookup by key, say) uses the
// breaker of such calls.
func WithMerchant(ctx context.Context, merchant string) context.Context {
	return context.WithValue(ctx, merchantKey{}, merchant)
}

func merchantFrom(ctx context.Context) string {
	m, _ := ctx.Value(merchantKey{}).(string)
	return m
}

// breakers holds a Client's circuit breakers: one per merchant, at most
// max of them, and one for calls that name no merchant.
//
// Why per merchant: what a merchant sends decides much of what the
// provider answers (its payment methods, its amounts, its account), so one
// merchant whose calls keep failing says little about the provider's health
// for the others. With a single breaker, twenty failing payments of one
// merchant made every merchant's payments 502 for as long as the breaker
// stayed open. A provider that is down for everyone still trips every
// merchant's breaker, each after Failures calls of that merchant: a little
// more load on a provider in trouble, bounded by Failures × active
// merchants, the price of isolation.
type breakers struct {
	settings func(name string) gobreaker.Settings
	max      int

	mu         sync.Mutex
	shared     *gobreaker.TwoStepCircuitBreaker[struct{}]
	byMerchant map[string]*merchantBreaker
	tick       uint64 // a use counter: the least recently used has the lowest
}

type merchantBreaker struct {
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	lastUsed uint64
}

func newBreakers(opts BreakerSettings) *breakers {
	failures := opts.Failures
	if failures == 0 {
		failures = DefaultBreakerFailures
	}
	openTimeout := opts.OpenTimeout
	if openTimeout <= 0 {
		openTimeout = DefaultBreakerOpenTimeout
	}
	limit := opts.Merchants
	if limit <= 0 {
		limit = DefaultBreakerMerchants
	}
	notify := opts.OnStateChange
	b := &breakers{max: limit, byMerchant: make(map[string]*merchantBreaker)}
	b.settings = func(merchant string) gobreaker.Settings {
		s := gobreaker.Settings{
			Name:        merchant,
			Timeout:     openTimeout,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
			IsExcluded:  func(err error) bool { return errors.Is(err, errCallerGaveUp) },
		}
		if notify != nil {
			s.OnStateChange = func(name string, from, to gobreaker.State) { notify(name, from.String(), to.String()) }
		}
		return s
	}
	b.shared = gobreaker.NewTwoStepCircuitBreaker[struct{}](b.settings(""))
	return b
}

// get returns merchant's breaker, making it if need be.
func (b *breakers) get(merchant string) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	if merchant == "" {
		return b.shared
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tick++
	if mb, ok := b.byMerchant[merchant]; ok {
		mb.lastUsed = b.tick
		return mb.cb
	}
	if len(b.byMerchant) >= b.max {
		b.evict()
	}
	mb := &merchantBreaker{cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](b.settings(merchant)), lastUsed: b.tick}
	b.byMerchant[merchant] = mb
	return mb.cb
}

// evict forgets the least recently used breaker, a closed one if there is
// any: forgetting an open breaker would let its merchant's failing calls
// through again at once. Called with mu held; a scan of at most max
// breakers, once per merchant beyond the bound.
func (b *breakers) evict() {
	var victim string
	var oldest uint64
	closed := false
	for m, mb := range b.byMerchant {
		isClosed := mb.cb.State() == gobreaker.StateClosed
		switch {
		case victim == "",
			isClosed && !closed,
			isClosed == closed && mb.lastUsed < oldest:
			victim, oldest, closed = m, mb.lastUsed, isClosed
		}
	}
	delete(b.byMerchant, victim)
}

func (b *breakers) state(merchant string) string {
	if merchant == "" {
		return b.shared.State().String()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	mb, ok := b.byMerchant[merchant]
	if !ok {
		return gobreaker.StateClosed.String()
	}
	return mb.cb.State().String()
}

// notClosed counts the breakers open or half-open. Asking a breaker its
// state moves it from open to half-open once its timeout has passed (and
// OnStateChange hears it), so readiness and metrics see a breaker that is
// ready to try again as it is.
func (b *breakers) notClosed() int {
	n := 0
	if b.shared.State() != gobreaker.StateClosed {
		n++
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, mb := range b.byMerchant {
		if mb.cb.State() != gobreaker.StateClosed {
			n++
		}
	}
	return n
}

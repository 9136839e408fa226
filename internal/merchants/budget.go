package merchants

import (
	"context"
	"sync"
	"time"
)

// KeyBudgetError refuses a key that would cost a database read when the
// client has spent its budget of unknown keys: the key was not checked.
type KeyBudgetError struct {
	// RetryAfter is when the client's budget is whole again.
	RetryAfter time.Duration
}

func (e *KeyBudgetError) Error() string {
	return "too many unknown API keys from this client; the key was not checked"
}

// clientKey carries the client's address to Authenticate.
type clientKey struct{}

// WithClient returns ctx carrying the address of the client a key comes
// from (the HTTP layer puts it there), which the budget of unknown keys is
// kept by. Without it Authenticate spends no budget.
func WithClient(ctx context.Context, client string) context.Context {
	return WithClientFunc(ctx, func() string { return client })
}

// WithClientFunc is WithClient with the address told by client, which
// Authenticate calls only when it reads a key from the database: a key
// its cache knows, nearly every request's, costs no address.
func WithClientFunc(ctx context.Context, client func() string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

func clientFrom(ctx context.Context) string {
	if client, ok := ctx.Value(clientKey{}).(func() string); ok {
		return client()
	}
	return ""
}

// maxBudgetClients bounds the clients a budget remembers; past it, a new
// client's unknown keys are refused until a window ends (a flood from many
// addresses must not grow the map without end).
const maxBudgetClients = 100_000

// keyBudget counts, per client address and fixed window, the database reads
// of keys that were not known. A read is reserved before it is made (so
// that concurrent requests cannot overspend) and given back when the key
// turns out to be known: known keys never spend the budget.
type keyBudget struct {
	limit  int
	window time.Duration

	mu      sync.Mutex
	clients map[string]*budgetWindow
}

type budgetWindow struct {
	start time.Time
	spent int
}

func newKeyBudget(limit int, window time.Duration) *keyBudget {
	return &keyBudget{limit: limit, window: window, clients: map[string]*budgetWindow{}}
}

// reserve takes one read from client's budget, or says how long until it
// has one again.
func (b *keyBudget) reserve(client string, now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.clients[client]
	if ok && now.Sub(w.start) >= b.window {
		w.start, w.spent = now, 0
	}
	if !ok {
		if len(b.clients) >= maxBudgetClients {
			for c, old := range b.clients {
				if now.Sub(old.start) >= b.window {
					delete(b.clients, c)
				}
			}
			if len(b.clients) >= maxBudgetClients {
				return false, b.window
			}
		}
		w = &budgetWindow{start: now}
		b.clients[client] = w
	}
	if w.spent >= b.limit {
		return false, max(w.start.Add(b.window).Sub(now), time.Second)
	}
	w.spent++
	return true, 0
}

// giveBack returns a read reserved for a key that was known.
func (b *keyBudget) giveBack(client string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.clients[client]; ok && w.spent > 0 {
		w.spent--
	}
}

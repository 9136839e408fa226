package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// elsewhere holds (r): every key created on one instance retried once on
// another that shares its database and has never seen the key, as a
// client's retry behind a load balancer lands; the API beside the floor.
type elsewhere struct {
	// Create is the creates on plain, Retry the retries of their keys on
	// other, each key once.
	Create, Retry result
	// FloorCreate and FloorRetry are the same on the floor: created on
	// floor, retried on floorOther, which reads the record from PostgreSQL.
	FloorCreate, FloorRetry result
	// PeerCreate and PeerRetry are the same on the Fiber peer
	// (tools/fiberpeer): created on peer, retried on peerOther, whose
	// middleware reads the stored answer from PostgreSQL first.
	PeerCreate, PeerRetry result
	// PeerOrders and PeerAnswers are how many orders and stored answers
	// the peer's database holds after every round: as many of each, if no
	// retry ran the handler again (a create cut off by a window's end
	// still stores its answer).
	PeerOrders, PeerAnswers int
	// Rollbacks is how many transactions plain's database rolled back
	// while the API's retries of the first round ran
	// (pg_stat_database.xact_rollback), and Errors how many ERROR lines
	// PostgreSQL logged meanwhile.
	Rollbacks, Errors int
}

// retryElsewhere runs (r): creates on A for a window, keeping every key that
// got its 201, then each of those keys once on B, until they run out or the
// window ends, for the API and then for the floor; that for a few rounds
// (one with -quick), so that a goal's verdict can be taken round by round
// between the six phases of one round, as the whole-process goals are
// (one round alone gave 1.86 in one run and 2.64 in the next). Each phase
// keeps its median round, with every round in its Runs. The rolled-back
// transactions and ERROR lines are counted around the first round's
// retries: PostgreSQL flushes a busy backend's statistics up to ten
// seconds late, so they are read once ten seconds have passed after the
// API's creates (the floor's creates run meanwhile) and again as long after
// its retries.
func (b *bench) retryElsewhere(ctx context.Context) (elsewhere, error) {
	const statsDelay = 11 * time.Second
	var e elsewhere
	rounds := b.rounds(3)
	run := fmt.Sprintf("x%d", time.Now().UnixNano())
	window := forDuration(b.opts.duration)
	var creates, retries, floorCreates, floorRetries, peerCreates, peerRetries []result
	for r := range rounds {
		b.say("(r) round %d/%d: creates on one API instance, keys kept for the retries", r+1, rounds)
		apiKeys := &keyList{}
		creates = append(creates, b.measure(ctx, b.plain, "(r) create on instance A", window,
			b.plain.createdInto(fmt.Sprintf("%sa%d", run, r), apiKeys)))
		created := time.Now()
		b.say("(r) creates on the floor, keys kept for the retries")
		floorKeys := &keyList{}
		floorCreates = append(floorCreates, b.measure(ctx, b.floor, "(r) the floor's create on instance A", window,
			b.floor.createdInto(fmt.Sprintf("%sf%d", run, r), floorKeys)))
		var rolledBack, errorsBefore int
		if r == 0 {
			sleep(ctx, time.Until(created.Add(statsDelay)))
			var err error
			if rolledBack, err = b.rollbacks(ctx); err != nil {
				return e, err
			}
			errorsBefore = b.pgLog.errors()
		}
		b.say("(r) each of %d keys retried once on instance B, which never saw them", apiKeys.len())
		retries = append(retries, b.measure(ctx, b.other, "(r) retry on instance B", apiKeys.window(b.opts.duration),
			b.other.retriedOnce(apiKeys)))
		retried := time.Now()
		b.say("(r) each of %d keys retried once on the floor's instance B, which reads PostgreSQL", floorKeys.len())
		floorRetries = append(floorRetries, b.measure(ctx, b.floorOther, "(r) the floor's retry on instance B",
			floorKeys.window(b.opts.duration), b.floorOther.retriedOnce(floorKeys)))
		if r == 0 {
			sleep(ctx, time.Until(retried.Add(statsDelay)))
			after, err := b.rollbacks(ctx)
			if err != nil {
				return e, err
			}
			e.Rollbacks, e.Errors = after-rolledBack, b.pgLog.errors()-errorsBefore
		}
		b.say("(r) creates on the Fiber peer, keys kept for the retries")
		peerKeys := &keyList{}
		peerCreates = append(peerCreates, b.measure(ctx, b.peer, "(r) the peer's create on instance A", window,
			b.peer.createdInto(fmt.Sprintf("%sp%d", run, r), peerKeys)))
		b.say("(r) each of %d keys retried once on the peer's instance B, which reads PostgreSQL", peerKeys.len())
		peerRetries = append(peerRetries, b.measure(ctx, b.peerOther, "(r) the peer's retry on instance B",
			peerKeys.window(b.opts.duration), b.peerOther.retriedOnce(peerKeys)))
	}
	var err error
	if e.PeerOrders, e.PeerAnswers, err = b.peerCounts(ctx); err != nil {
		return e, err
	}
	e.Create, e.Retry, e.FloorCreate, e.FloorRetry = medianCPU(creates), medianCPU(retries), medianCPU(floorCreates), medianCPU(floorRetries)
	e.PeerCreate, e.PeerRetry = medianCPU(peerCreates), medianCPU(peerRetries)
	return e, nil
}

// peerCounts is how many orders and stored answers the peer's database
// holds.
func (b *bench) peerCounts(ctx context.Context) (orders, answers int, err error) {
	conn, err := pgx.Connect(ctx, b.peerDB)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = conn.Close(ctx) }()
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*)::int FROM fiberpeer_orders), (SELECT count(*)::int FROM fiberpeer_answers)`).
		Scan(&orders, &answers)
	return orders, answers, err
}

// rollbacks is pg_stat_database.xact_rollback of the side-by-side database.
func (b *bench) rollbacks(ctx context.Context) (int, error) {
	return b.count(ctx, `SELECT xact_rollback::int FROM pg_stat_database WHERE datname = current_database()`)
}

// keyList is the keys a phase created, for the next phase to retry each
// once, in order.
type keyList struct {
	mu   sync.Mutex
	keys []string
	next atomic.Int64 // the next key to retry
}

func (l *keyList) add(k string) {
	l.mu.Lock()
	l.keys = append(l.keys, k)
	l.mu.Unlock()
}

func (l *keyList) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// take is the next key not yet retried, or false when none is left.
func (l *keyList) take() (string, bool) {
	i := int(l.next.Add(1) - 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.keys) {
		return "", false
	}
	return l.keys[i], true
}

// window measures until every key has been taken, or for at most d.
func (l *keyList) window(d time.Duration) func(context.Context) {
	return func(ctx context.Context) {
		deadline := time.Now().Add(d)
		for ctx.Err() == nil && time.Now().Before(deadline) && int(l.next.Load()) < l.len() {
			sleep(ctx, 10*time.Millisecond)
		}
	}
}

// createdInto is created, keeping each key that got its 201 in into.
func (a *api) createdInto(run string, into *keyList) op {
	return func(ctx context.Context, w, i int) error {
		k := fmt.Sprintf("%s-%d-%d", run, w, i)
		ans, err := a.createOrder(ctx, k)
		if err = expect(ans, err, http.StatusCreated, false); err == nil {
			into.add(k)
		}
		return err
	}
}

// retriedOnce sends each key of keys once and expects its stored 201,
// marked replayed where the target marks replays (the peer does not: its
// orders are counted instead). Once every key is taken, a client waits for
// the window's end, whose requests are not counted.
func (a *api) retriedOnce(keys *keyList) op {
	return func(ctx context.Context, _, _ int) error {
		k, ok := keys.take()
		if !ok {
			<-ctx.Done()
			return ctx.Err()
		}
		ans, err := a.createOrder(ctx, k)
		return expect(ans, err, http.StatusCreated, a.orders.marksReplays)
	}
}

// logCounter passes a server's log on to next and counts its lines that
// report an ERROR (PostgreSQL's "ERROR:  …"), and those that name an
// idempotency key (a unique violation's "DETAIL:  Key (merchant_id,
// idempotency_key)=(…)"). It keeps no more of a line than it needs to
// join one split across writes (at most a few kilobytes), and none once
// counted: a line may hold a key. Of an ERROR it keeps the kind, the
// message's words up to its first quote, colon or parenthesis, where
// PostgreSQL puts the values ("invalid input syntax for type uuid: …").
type logCounter struct {
	next  io.Writer
	mu    sync.Mutex
	tail  []byte // the start of a line not yet ended
	n     int
	keyed int
	kinds map[string]int // ERROR lines by kind
}

// maxLine is how much of one line logCounter looks at: the severity and
// the key's detail come first.
const maxLine = 4 << 10

func (c *logCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			c.tail = append(c.tail, rest[:min(len(rest), maxLine-len(c.tail))]...)
			break
		}
		line := append(c.tail, rest[:min(i, maxLine-len(c.tail))]...)
		if _, msg, ok := bytes.Cut(line, []byte("ERROR:")); ok {
			c.n++
			if c.kinds == nil {
				c.kinds = map[string]int{}
			}
			c.kinds[errorKind(msg)]++
		}
		if bytes.Contains(line, []byte("idempotency_key)=(")) {
			c.keyed++
		}
		c.tail, rest = line[:0], rest[i+1:]
	}
	c.mu.Unlock()
	return c.next.Write(p)
}

// errorKind is an ERROR's message up to the first quote, colon or
// parenthesis, at most 80 bytes.
func errorKind(msg []byte) string {
	msg = bytes.TrimSpace(msg)
	if i := bytes.IndexAny(msg, `"':(`); i >= 0 {
		msg = msg[:i]
	}
	return string(bytes.TrimSpace(msg[:min(len(msg), 80)]))
}

// errorKinds lists the ERROR lines' kinds with their counts, most first.
func (c *logCounter) errorKinds() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	kinds := slices.Collect(maps.Keys(c.kinds))
	slices.SortFunc(kinds, func(x, y string) int { return cmp.Or(c.kinds[y]-c.kinds[x], strings.Compare(x, y)) })
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = fmt.Sprintf("%q × %d", k, c.kinds[k])
	}
	return strings.Join(out, ", ")
}

func (c *logCounter) errors() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// keys is how many lines named an idempotency key.
func (c *logCounter) keys() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keyed
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// sideBySide holds the medians of phases (a) to (e), by letter.
type sideBySide struct {
	Raw, Without, Create, CreateRedis, ReplayPG, ReplayRedis result
	// ReplayOne and ReplayOneRedis replay a single key, as a client
	// retrying one operation does: the in-process cache answers them.
	ReplayOne, ReplayOneRedis result
	// RawNoRecord is (a) without the record's statement.
	RawNoRecord result
	// Guarded is the common design beside ours: the key reserved, then
	// the order's transaction, then the answer stored.
	Guarded result
	Rounds  int
}

// sideBySide runs (a), (b) and (c) in turn for several rounds, so that a
// burst of noise on a shared machine hits every side alike, and keeps the
// median round of each; then the replays (d) and (e).
func (b *bench) sideBySide(ctx context.Context) (sideBySide, error) {
	o := b.opts
	rounds := b.rounds(3)
	run := fmt.Sprintf("r%d", time.Now().UnixNano())
	window := forDuration(o.duration)

	// One real record lends the raw loop its fingerprint and answer, so
	// both write rows of the same size.
	template := run + "-template"
	ans, err := b.plain.createOrder(ctx, template)
	if err := expect(ans, err, http.StatusCreated, false); err != nil {
		return sideBySide{}, fmt.Errorf("first order: %w", err)
	}
	var fingerprint string
	var body []byte
	if err := b.pool.QueryRow(ctx, `SELECT fingerprint, response_body FROM idempotency_records WHERE idempotency_key = $1`,
		template).Scan(&fingerprint, &body); err != nil {
		return sideBySide{}, err
	}

	var raw, rawNoRecord, without, create, guarded []result
	for r := range rounds {
		b.say("round %d/%d: (a) raw SQL through pgx", r+1, rounds)
		raw = append(raw, b.measureRaw(ctx, "(a) raw SQL of an idempotent create", window,
			rawCreate(b.pool, fmt.Sprintf("%sa%d", run, r), fingerprint, body, true)))
		b.say("round %d/%d: (a') the same SQL without the record", r+1, rounds)
		rawNoRecord = append(rawNoRecord, b.measureRaw(ctx, "(a') raw SQL, the record left out", window,
			rawCreate(b.pool, fmt.Sprintf("%sn%d", run, r), fingerprint, body, false)))
		b.say("round %d/%d: (b) POST /v1/orders without the middleware", r+1, rounds)
		without = append(without, b.measure(ctx, b.baseline, "(b) create without idempotency", window,
			b.baseline.created(fmt.Sprintf("%sb%d", run, r))))
		b.say("round %d/%d: (c) idempotent POST /v1/orders", r+1, rounds)
		create = append(create, b.measure(ctx, b.plain, "(c) idempotent create", window,
			b.plain.created(fmt.Sprintf("%sc%d", run, r))))
		b.say("round %d/%d: (g) POST /v1/orders with reserve and complete around it", r+1, rounds)
		guarded = append(guarded, b.measure(ctx, b.guarded, "(g) create, key reserved and completed in writes of their own", window,
			b.guarded.created(fmt.Sprintf("%sg%d", run, r))))
	}
	res := sideBySide{Raw: medianRound(raw), RawNoRecord: medianRound(rawNoRecord), Without: medianRound(without), Create: medianRound(create),
		Guarded: medianRound(guarded), Rounds: rounds}

	b.say("(c') idempotent POST /v1/orders with Redis (stores the answers that (e) replays)")
	res.CreateRedis = b.measure(ctx, b.cached, "(c') idempotent create, with Redis", window, b.cached.created(run+"e"))

	pgKeys, err := b.keys(ctx, run+"c0-%")
	if err != nil {
		return res, err
	}
	b.say("(d) replays from PostgreSQL over %d keys", len(pgKeys))
	res.ReplayPG = b.measure(ctx, b.plain, "(d) replay from PostgreSQL", window, b.plain.replayed(pgKeys))

	redisKeys, err := b.keys(ctx, run+"e-%")
	if err != nil {
		return res, err
	}
	b.say("(e) replays from Redis over %d keys", len(redisKeys))
	res.ReplayRedis = b.measure(ctx, b.cached, "(e) replay from Redis", window, b.cached.replayed(redisKeys))

	b.say("(d1) and (e1) replays of one key, without Redis and with it")
	res.ReplayOne = b.measure(ctx, b.plain, "(d1) replay of one key, without Redis", window, b.plain.replayed(pgKeys[:1]))
	res.ReplayOneRedis = b.measure(ctx, b.cached, "(e1) replay of one key, with Redis", window, b.cached.replayed(redisKeys[:1]))
	return res, nil
}

// measure runs a closed loop against target and counts the times, during
// it, that a request of target's waited for a database connection.
// It also reads the API process's CPU over the measured window, less what
// the process spends idle in as long (sampled just before), so that
// CPUPerRequest is what a request costs the API.
func (b *bench) measure(ctx context.Context, target *api, name string, window func(context.Context), do op) result {
	return b.measureWith(ctx, target, name, b.opts.clients, window, do)
}

// measureWith is measure with clients clients.
func (b *bench) measureWith(ctx context.Context, target *api, name string, clients int, window func(context.Context), do op) result {
	const idleSample = 2 * time.Second
	idle, idleErr := idleCPU(ctx, target.pid, idleSample)
	before, errBefore := poolWaits(ctx, target.base)
	var (
		used     usage
		gcCPU    time.Duration
		gcCycles int
	)
	if target.gc != nil {
		inner := window
		window = func(ctx context.Context) {
			target.gc.start()
			inner(ctx)
			gcCPU, gcCycles = target.gc.stop()
		}
	}
	var cpuErr error
	r := closedLoop(ctx, name, clients, b.opts.warm, cpuWindow(target.pid, window, &used, &cpuErr), do)
	r.GC, r.GCCycles = gcCPU, gcCycles
	after, errAfter := poolWaits(ctx, target.base)
	r.PoolWaits = after - before
	if errBefore != nil || errAfter != nil {
		r.PoolWaits = -1
	}
	if idleErr == nil && cpuErr == nil {
		r.Spent, r.Sys, r.Switches = used.cpu(), used.sys, used.switches
		r.Idle = time.Duration(float64(idle) * r.Elapsed.Seconds() / idleSample.Seconds())
		r.CPU = max(0, r.Spent-r.Idle)
	}
	return r
}

// measureRaw is measure for the raw loop, whose pool is the bench's own.
func (b *bench) measureRaw(ctx context.Context, name string, window func(context.Context), do op) result {
	before := b.pool.Stat().EmptyAcquireCount()
	r := closedLoop(ctx, name, b.opts.clients, b.opts.warm, window, do)
	r.PoolWaits = int(b.pool.Stat().EmptyAcquireCount() - before)
	return r
}

// medianRound is the round with the median rate.
func medianRound(rs []result) result {
	s := slices.SortedFunc(slices.Values(rs), func(x, y result) int {
		switch {
		case x.Rate() < y.Rate():
			return -1
		case x.Rate() > y.Rate():
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

// keys lists up to 10,000 stored keys matching a LIKE pattern.
func (b *bench) keys(ctx context.Context, like string) ([]string, error) {
	rows, err := b.pool.Query(ctx, `SELECT idempotency_key FROM idempotency_records WHERE idempotency_key LIKE $1 LIMIT 10000`, like)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no stored keys match %q", like)
	}
	return keys, nil
}

// storms holds (f): the storm on each API, without and with Redis.
type storms struct {
	Plain, Cached stormResult
	// Orders is how many orders each storm's key made (want 1).
	PlainOrders, CachedOrders int
}

// retryStorm runs (f) against the API without Redis and the one with it,
// each on a fresh key, and counts the orders each key made.
func (b *bench) retryStorm(ctx context.Context) (storms, error) {
	var s storms
	for _, side := range []struct {
		target *api
		res    *stormResult
		orders *int
		name   string
	}{{b.plain, &s.Plain, &s.PlainOrders, "without Redis"}, {b.cached, &s.Cached, &s.CachedOrders, "with Redis"}} {
		key := fmt.Sprintf("storm-%d", time.Now().UnixNano())
		before, err := b.count(ctx, `SELECT count(*) FROM orders`)
		if err != nil {
			return s, err
		}
		b.say("(f) retry storm %s: %d concurrent requests on one key", side.name, b.opts.storm)
		r, err := storm(ctx, side.target, b.opts.storm, key)
		if err != nil {
			return s, err
		}
		r.Name = "(f) retry storm, " + side.name
		*side.res = r
		after, err := b.count(ctx, `SELECT count(*) FROM orders`)
		if err != nil {
			return s, err
		}
		*side.orders = after - before
	}
	return s, nil
}

// growthRow is create and replay throughput with n records stored.
type growthRow struct {
	Records        int
	Create, Replay result
}

// growth empties the records table, then fills it up to each size in turn
// and measures replay (from PostgreSQL) and create at each. The records a
// create step adds are deleted after it, so every step starts at its size.
func (b *bench) growth(ctx context.Context) ([]growthRow, error) {
	template, err := b.anyKey(ctx)
	if err != nil {
		return nil, err
	}
	// Keep the template's row; everything else goes.
	if _, err := b.pool.Exec(ctx, `DELETE FROM idempotency_records WHERE idempotency_key <> $1`, template); err != nil {
		return nil, err
	}
	if _, err := b.pool.Exec(ctx, `VACUUM ANALYZE idempotency_records`); err != nil {
		return nil, err
	}
	window := forDuration(b.opts.duration / 2)
	var rows []growthRow
	seeded := 0
	for _, n := range b.opts.sizes {
		b.say("growth: seeding records %d to %d", seeded+1, n)
		if err := b.seed(ctx, template, "seed-", seeded+1, n, time.Now().Add(24*time.Hour)); err != nil {
			return rows, err
		}
		seeded = n
		stored, err := b.count(ctx, `SELECT count(*) FROM idempotency_records`)
		if err != nil {
			return rows, err
		}
		b.say("growth: %d records stored; replay, then create", stored)
		row := growthRow{Records: stored}
		row.Replay = closedLoop(ctx, "replay", b.opts.clients, b.opts.warm, window, b.plain.replayedSeeded("seed-", n))
		prefix := fmt.Sprintf("g%d-", n)
		row.Create = closedLoop(ctx, "create", b.opts.clients, b.opts.warm, window, b.plain.created(prefix[:len(prefix)-1]))
		if _, err := b.pool.Exec(ctx, `DELETE FROM idempotency_records WHERE idempotency_key LIKE $1`, prefix+"%"); err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// anyKey is the key of one stored answer to orderBody, for seeding.
func (b *bench) anyKey(ctx context.Context) (string, error) {
	var k string
	err := b.pool.QueryRow(ctx, `SELECT idempotency_key FROM idempotency_records WHERE response_status = 201 LIMIT 1`).Scan(&k)
	return k, err
}

// seed copies the record of key template to keys prefix+from … prefix+to,
// expiring at expires, in one statement (one commit).
func (b *bench) seed(ctx context.Context, template, prefix string, from, to int, expires time.Time) error {
	_, err := b.pool.Exec(ctx, `
INSERT INTO idempotency_records (merchant_id, idempotency_key, method, path, fingerprint, state,
    recovery_point, fence, locked_until, response_status, response_headers, response_body,
    response_key_id, created_at, updated_at, expires_at)
SELECT t.merchant_id, $1 || g, t.method, t.path, t.fingerprint, t.state,
    t.recovery_point, t.fence, t.locked_until, t.response_status, t.response_headers, t.response_body,
    t.response_key_id, t.created_at, t.updated_at, $2
FROM idempotency_records t, generate_series($3::int, $4::int) g
WHERE t.merchant_id = 'mch_acme' AND t.idempotency_key = $5`, prefix, expires, from, to, template)
	if err != nil {
		return err
	}
	_, err = b.pool.Exec(ctx, `ANALYZE idempotency_records`)
	return err
}

// replayedSeeded replays keys prefix1 … prefixN, spread over the range.
func (a *api) replayedSeeded(prefix string, n int) op {
	return func(ctx context.Context, w, i int) error {
		k := fmt.Sprintf("%s%d", prefix, (w*7919+i*104729)%n+1)
		ans, err := a.createOrder(ctx, k)
		return expect(ans, err, http.StatusCreated, true)
	}
}

// purgeResult compares latency under create load with and without the
// janitor purging a backlog.
type purgeResult struct {
	Expired        int
	Quiet, Purging result
	// Left is how many expired records were still there when the window
	// closed (0: the purge finished within it).
	Left int
}

// purgeUnderLoad measures create load for one window with nothing to
// purge, then seeds the expired records in one commit and measures the same
// load until the janitor (every second, on the API without Redis) has
// deleted them all, or five minutes have passed.
func (b *bench) purgeUnderLoad(ctx context.Context) (purgeResult, error) {
	res := purgeResult{Expired: b.opts.purge}
	b.say("purge: create load with nothing to purge")
	res.Quiet = closedLoop(ctx, "create, nothing to purge", b.opts.clients, b.opts.warm, forDuration(b.opts.duration),
		b.plain.created(fmt.Sprintf("pq%d", time.Now().UnixNano())))

	template, err := b.anyKey(ctx)
	if err != nil {
		return res, err
	}
	b.say("purge: seeding %d expired records", b.opts.purge)
	if err := b.seed(ctx, template, "expired-", 1, b.opts.purge, time.Now().Add(-time.Hour)); err != nil {
		return res, err
	}
	b.say("purge: create load while the janitor deletes them")
	// The window's end is watched by asking whether any expired record is
	// left, which reads the first entry of the expiry index. Counting them
	// instead reads the whole backlog: some 250 ms of a core on a million
	// records, four times a second, which slowed the janitor and the
	// creates being measured. They are counted once, when the window closes.
	var watchErr error
	until := func(ctx context.Context) {
		deadline := time.Now().Add(5 * time.Minute)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			sleep(ctx, 250*time.Millisecond)
			var left bool
			watchErr = b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM idempotency_records WHERE expires_at <= now())`).Scan(&left)
			if watchErr != nil || !left {
				return
			}
		}
	}
	res.Purging = closedLoop(ctx, "create, janitor purging", b.opts.clients, 0, until,
		b.plain.created(fmt.Sprintf("pp%d", time.Now().UnixNano())))
	if watchErr != nil && ctx.Err() == nil {
		return res, fmt.Errorf("purge: watching the backlog: %w", watchErr)
	}
	res.Left, err = b.count(ctx, `SELECT count(*) FROM idempotency_records WHERE expires_at <= now()`)
	return res, err
}

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// profile sizes every scenario.
type profile struct {
	name string
	// deadline bounds the whole run, build included.
	deadline time.Duration
	// stormRequests is how many concurrent requests share one key, once for
	// an order and once for its payment.
	stormRequests int
	// chaosPayments is how many payments go through the provider's chaos.
	chaosPayments int
	// kills is how many SIGKILLs hit the API instances.
	kills int
	// killOps, redisOps, postgresOps, clientOps are the operations (an order
	// and its payment) of those scenarios' clients.
	killOps, redisOps, postgresOps, clientOps int
	// redisKills and postgresCrashes are the store faults.
	redisKills, postgresCrashes int
	// ttlKeys is how many keys outlive their record in the expiry scenario.
	ttlKeys int
	// pauses is how many times the pause scenario freezes an instance.
	pauses int
	// failoverOps is the least number of operations (an order, its
	// payment, a refund) the failover scenarios' clients make;
	// failoverStall is how long the standby receives nothing before the
	// primary's machine dies, and failoverDetect how long after that the
	// standby is promoted (a failover manager's detection time).
	failoverOps                   int
	failoverStall, failoverDetect time.Duration
	// workers is the number of concurrent clients in the load scenarios.
	workers int
	// settle bounds the wait for the reconciler before an audit.
	settle time.Duration
}

func profileNamed(name string) (profile, error) {
	switch name {
	case "full":
		return profile{
			name: "full", deadline: 9*time.Minute + 30*time.Second,
			stormRequests: 1000, chaosPayments: 1000,
			kills: 24, killOps: 600,
			redisOps: 600, redisKills: 3,
			postgresOps: 600, postgresCrashes: 3,
			ttlKeys: 200, clientOps: 300,
			pauses:      20,
			failoverOps: 600, failoverStall: 2 * time.Second, failoverDetect: time.Second,
			workers: 24, settle: 60 * time.Second,
		}, nil
	case "short":
		return profile{
			name: "short", deadline: 4 * time.Minute,
			stormRequests: 100, chaosPayments: 100,
			kills: 3, killOps: 60,
			redisOps: 60, redisKills: 1,
			postgresOps: 60, postgresCrashes: 1,
			ttlKeys: 20, clientOps: 30,
			pauses:      2,
			failoverOps: 60, failoverStall: time.Second, failoverDetect: time.Second,
			workers: 8, settle: 30 * time.Second,
		}, nil
	}
	return profile{}, fmt.Errorf("-profile %q: want full or short", name)
}

// scenario is one fault run against a fresh cluster (its own database and
// provider ledger).
type scenario struct {
	name string
	// about is the one-line description in the report.
	about string
	// setup tunes the cluster before it starts.
	setup clusterConfig
	// run drives the load and injects the faults; it returns what it
	// injected, for the report.
	run func(ctx context.Context, s *stage) (faults string, err error)
	// audit, when set, replaces the common audit: a scenario that loses
	// committed rows on purpose (failover) counts what the common audit
	// would call half-done.
	audit func(ctx context.Context, s *stage) (auditResult, error)
}

func scenarios(p profile) []scenario {
	return []scenario{
		stormScenario(p),
		providerScenario(p),
		killScenario(p),
		redisScenario(p),
		postgresScenario(p),
		ttlScenario(p),
		clientScenario(p),
		pauseScenario(p),
		failoverScenario(p, false),
		failoverScenario(p, true),
	}
}

// runScenarios runs each selected scenario in turn and audits it.
func runScenarios(ctx context.Context, sys *system, p profile, o options) ([]row, error) {
	var only map[string]bool
	if o.only != "" {
		only = map[string]bool{}
		for _, n := range strings.Split(o.only, ",") {
			only[strings.TrimSpace(n)] = true
		}
	}
	var rows []row
	for i, sc := range scenarios(p) {
		if only != nil && !only[sc.name] {
			continue
		}
		rnd := rand.New(rand.NewPCG(o.seed, uint64(i+1)))
		r, err := runScenario(ctx, sys, p, sc, rnd)
		if err != nil {
			return rows, fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		rows = append(rows, r)
		fmt.Fprintf(sys.out, "%s: %s\n", sc.name, r.summary())
	}
	return rows, nil
}

// runScenario starts a cluster for sc, runs it, waits for the system to
// settle, and audits it.
func runScenario(ctx context.Context, sys *system, p profile, sc scenario, rnd *rand.Rand) (row, error) {
	fmt.Fprintf(sys.out, "%s: starting (%s)\n", sc.name, sc.about)
	started := time.Now()
	c, err := sys.startCluster(ctx, sc.name, sc.setup, rnd)
	if err != nil {
		return row{}, err
	}
	defer c.close()
	st := &stage{c: c, p: p, rnd: rnd, rec: newRecorder(), log: sys.out, name: sc.name}
	faults, err := sc.run(ctx, st)
	if err != nil {
		return row{}, err
	}
	loadDone := time.Now()
	var res auditResult
	if sc.audit != nil {
		res, err = sc.audit(ctx, st)
	} else {
		res, err = audit(ctx, c, st.rec, auditOptions{settle: p.settle, allowedOrders: st.allowedOrders, expiring: sc.setup.ttl > 0})
	}
	if err != nil {
		return row{}, fmt.Errorf("audit: %w", err)
	}
	res.violations = append(res.violations, st.violations()...)
	return row{
		scenario: sc.name, about: sc.about, requests: st.rec.requestCount(), faults: faults,
		audit: res, p50: st.rec.lat.Percentile(50), p99: st.rec.lat.Percentile(99),
		statuses: st.rec.statusSummary(), load: loadDone.Sub(started), total: time.Since(started),
		failover: st.failover,
	}, nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/tools/harness"
)

// instances is how many API processes share each scenario's database.
const instances = 3

// Settings every API instance runs with: short enough that crashed requests
// are taken over, unknown outcomes reconciled and expired keys purged within
// a scenario, as a deployment would with its own (longer) values.
const (
	lockTimeout       = 2 * time.Second
	idempotencyWait   = 1 * time.Second
	reconcileInterval = 500 * time.Millisecond
	providerTimeout   = 1 * time.Second
	webhookSecret     = "whsec_chaos"
	apiKey            = "sk_test_acme"
	// logKeySecret is shared by every instance, so one key's lines can be
	// followed across instances and restarts in the logs.
	logKeySecret = "chaos-log-key-secret"
)

// system is what outlives the scenarios: the binaries, the PostgreSQL
// cluster (one database per scenario) and the redis-server.
type system struct {
	out      io.Writer
	seed     uint64
	dir      string // binaries and logs
	logDir   string
	api      string // binary paths
	provider string
	pg       *harness.Postgres
	redis    *testkit.Redis
	keepLogs bool
}

// startSystem builds the binaries and starts the stores.
func startSystem(ctx context.Context, seed uint64, out io.Writer) (*system, error) {
	dir, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		return nil, err
	}
	s := &system{out: out, seed: seed, dir: dir, logDir: filepath.Join(dir, "logs")}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "building cmd/api and cmd/provider")
	bins, err := testkit.Build(ctx, dir, "cmd/api", "cmd/provider")
	if err != nil {
		s.close(false)
		return nil, err
	}
	s.api, s.provider = bins[0], bins[1]

	pgLog, err := s.logFile("postgres")
	if err != nil {
		s.close(false)
		return nil, err
	}
	if s.pg, err = harness.StartPostgres(pgLog); err != nil {
		s.close(false)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	redisLog, err := s.logFile("redis")
	if err != nil {
		s.close(false)
		return nil, err
	}
	redisDir := filepath.Join(dir, "redis")
	if err := os.MkdirAll(redisDir, 0o755); err != nil {
		s.close(false)
		return nil, err
	}
	if s.redis, err = testkit.RunRedis(redisDir, redisLog); err != nil {
		s.close(false)
		return nil, fmt.Errorf("redis: %w", err)
	}
	fmt.Fprintf(out, "postgres on 127.0.0.1:%d, redis on %s, logs in %s\n", s.pg.Port(), s.redis.Addr, s.logDir)
	return s, nil
}

// close stops the stores and removes the folder, unless its logs are kept.
func (s *system) close(keep bool) {
	if s.redis != nil {
		s.redis.Kill()
	}
	if s.pg != nil {
		s.pg.Close()
	}
	if keep || s.keepLogs {
		fmt.Fprintf(s.out, "logs kept in %s\n", s.logDir)
		return
	}
	_ = os.RemoveAll(s.dir)
}

// logFile opens (appending) the log of one process; restarts append to it.
// It is an *os.File, which exec hands to the process as its stdout and
// stderr directly, so no copying goroutine and no lock are involved.
func (s *system) logFile(name string) (io.Writer, error) {
	return os.OpenFile(filepath.Join(s.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// clusterConfig is what a scenario changes in its cluster.
type clusterConfig struct {
	// Provider chaos: shares of first requests whose answer is lost or that
	// answer 503, and the most latency added.
	lostRate, unavailableRate float64
	latency                   time.Duration
	// ttl is IDEMPOTENCY_TTL; zero keeps the default (24h).
	ttl time.Duration
	// noRedis runs the instances without REDIS_URL.
	noRedis bool
	// env adds settings to every instance (a later one wins).
	env []string
	// providerVia, if set, says where instance i (from 0) reaches the
	// provider at upstream: a proxy of the scenario's own.
	providerVia func(i int, upstream string) (string, error)
	// replicated puts the scenario's database on a primary of its own with
	// a streaming standby (through a Link the scenario may stall), and the
	// instances on a URL that names both, writable first; synchronous makes
	// every commit wait for the standby.
	replicated, synchronous bool
}

// cluster is one scenario's processes: three API instances on a database of
// their own, and a provider with a fresh ledger whose webhooks reach the
// instances through a balancer.
type cluster struct {
	sys      *system
	name     string
	dbName   string
	dbURL    string
	provider *testkit.Process
	apis     []*testkit.Process
	webhooks *balancer
	group    testkit.Group
	// A replicated cluster's servers, and the link the standby streams
	// through.
	primary, standby *harness.Postgres
	link             *harness.Link
}

// startCluster creates the scenario's database and starts its provider and
// API instances.
func (s *system) startCluster(ctx context.Context, name string, cfg clusterConfig, rnd *rand.Rand) (*cluster, error) {
	c := &cluster{sys: s, name: name, dbName: "chaos_" + strings.ReplaceAll(name, "-", "_")}
	var err error
	if cfg.replicated {
		if err := c.startReplicated(cfg.synchronous); err != nil {
			c.close()
			return nil, err
		}
	} else if c.dbURL, err = s.pg.CreateDatabase(c.dbName); err != nil {
		return nil, err
	}
	addrs := make([]string, instances)
	for i := range addrs {
		if addrs[i], err = testkit.FindFreeAddr(); err != nil {
			return nil, err
		}
	}
	// Webhooks go through a balancer that skips dead instances, as a load
	// balancer in front of a deployment would.
	c.webhooks, err = startBalancer(addrs, 0, rnd.Uint64(), nil)
	if err != nil {
		return nil, err
	}

	provAddr, err := testkit.FindFreeAddr()
	if err != nil {
		c.close()
		return nil, err
	}
	provLog, err := s.logFile(name + "-provider")
	if err != nil {
		c.close()
		return nil, err
	}
	c.provider = c.group.Add(&testkit.Process{
		Name: name + "-provider", Path: s.provider, Addr: provAddr, Log: provLog,
		Env: []string{
			"HTTP_ADDR=" + provAddr,
			"WEBHOOK_URL=" + c.webhooks.url + "/v1/webhooks/provider",
			"WEBHOOK_SECRET=" + webhookSecret,
			"DUPLICATE_WEBHOOK_RATE=0.1",
			fmt.Sprintf("CHAOS_LOST_RESPONSE_RATE=%g", cfg.lostRate),
			fmt.Sprintf("CHAOS_UNAVAILABLE_RATE=%g", cfg.unavailableRate),
			"CHAOS_LATENCY=" + cfg.latency.String(),
		},
	})
	if err := c.provider.Start(30 * time.Second); err != nil {
		c.close()
		return nil, err
	}

	env := []string{
		"DATABASE_URL=" + c.dbURL,
		"PROVIDER_URL=http://" + provAddr,
		"PROVIDER_TIMEOUT=" + providerTimeout.String(),
		"PROVIDER_WEBHOOK_SECRET=" + webhookSecret,
		"IDEMPOTENCY_LOCK_TIMEOUT=" + lockTimeout.String(),
		"IDEMPOTENCY_WAIT=" + idempotencyWait.String(),
		"RECONCILE_INTERVAL=" + reconcileInterval.String(),
		"JANITOR_INTERVAL=1s",
		"SHUTDOWN_TIMEOUT=2s",
		"DB_MAX_CONNS=20",
		"DB_CONNECT_TIMEOUT=60s",
		"LOG_LEVEL=warn",
		"LOG_KEY_SECRET=" + logKeySecret,
		"DEMO_SEED=true",
		// The scenarios check the invariant under load, not the new-key
		// limit (on by default), which would refuse part of that load.
		"RATE_LIMIT_NEW_KEYS=0",
		// The harness is one client address (loopback) with many
		// connections and, in its hostile scenarios, many wrong keys: the
		// per-address bounds would refuse part of the load.
		"MAX_CONNS_PER_CLIENT=4096", "UNKNOWN_KEY_BUDGET=0",
	}
	if !cfg.noRedis {
		env = append(env, "REDIS_URL="+s.redis.URL())
	}
	if cfg.ttl > 0 {
		env = append(env, "IDEMPOTENCY_TTL="+cfg.ttl.String())
	}
	env = append(env, cfg.env...)
	for i, addr := range addrs {
		log, err := s.logFile(fmt.Sprintf("%s-api%d", name, i+1))
		if err != nil {
			c.close()
			return nil, err
		}
		instEnv := append([]string{"HTTP_ADDR=" + addr}, env...)
		if cfg.providerVia != nil {
			via, err := cfg.providerVia(i, "http://"+provAddr)
			if err != nil {
				c.close()
				return nil, err
			}
			instEnv = append(instEnv, "PROVIDER_URL="+via)
		}
		p := c.group.Add(&testkit.Process{
			Name: fmt.Sprintf("%s-api%d", name, i+1), Path: s.api, Addr: addr, Log: log,
			Env: instEnv,
		})
		c.apis = append(c.apis, p)
	}
	// The first instance migrates the database; the others then start
	// together.
	if err := c.apis[0].Start(60 * time.Second); err != nil {
		c.close()
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := 1; i < instances; i++ {
		wg.Go(func() { errs[i] = c.apis[i].Start(60 * time.Second) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.close()
			return nil, err
		}
	}
	if ctx.Err() != nil {
		c.close()
		return nil, ctx.Err()
	}
	return c, nil
}

// startReplicated starts the scenario's own primary, a standby streaming
// from it through a link, and its database; the instances get a URL naming
// both servers with target_session_attrs=read-write, so that pgx connects
// to whichever accepts writes, as it would to a primary and its standbys
// in production (harness.FailoverParams).
func (c *cluster) startReplicated(synchronous bool) error {
	primaryLog, err := c.sys.logFile(c.name + "-postgres-primary")
	if err != nil {
		return err
	}
	if c.primary, err = harness.StartPostgres(primaryLog); err != nil {
		return fmt.Errorf("primary: %w", err)
	}
	if c.link, err = harness.StartLink(c.primary.Addr); err != nil {
		return err
	}
	standbyLog, err := c.sys.logFile(c.name + "-postgres-standby")
	if err != nil {
		return err
	}
	if c.standby, err = c.primary.StartStandby(c.link.Addr(), standbyLog); err != nil {
		return fmt.Errorf("standby: %w", err)
	}
	if err := c.primary.WaitStreaming(time.Minute); err != nil {
		return err
	}
	if _, err := c.primary.CreateDatabase(c.dbName); err != nil {
		return err
	}
	if synchronous {
		if err := c.primary.SetSynchronous(true); err != nil {
			return err
		}
	}
	c.dbURL, err = harness.FailoverURL(c.dbName, c.primary.Addr, c.standby.Addr)
	return err
}

// close kills the cluster's processes and stops its balancer. The database
// stays until the system goes, for a look after a failed audit; a
// replicated cluster's servers go with it.
func (c *cluster) close() {
	c.group.KillAll()
	if c.webhooks != nil {
		c.webhooks.close()
	}
	if c.link != nil {
		c.link.Close()
	}
	for _, pg := range []*harness.Postgres{c.standby, c.primary} {
		if pg != nil {
			pg.Close()
		}
	}
}

// providerURL is the provider's base URL.
func (c *cluster) providerURL() string { return "http://" + c.provider.Addr }

// apiURL is instance i's base URL.
func (c *cluster) apiURL(i int) string { return "http://" + c.apis[i].Addr }

// apiAddrs lists the instances' addresses.
func (c *cluster) apiAddrs() []string {
	out := make([]string, len(c.apis))
	for i, p := range c.apis {
		out[i] = p.Addr
	}
	return out
}

// metric sums a counter's samples whose labels contain every one of
// labels, over the live instances' /metrics.
func (c *cluster) metric(ctx context.Context, name string, labels ...string) float64 {
	var sum float64
	for i, p := range c.apis {
		if !p.Running() {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.apiURL(i)+"/metrics", nil)
		if err != nil {
			continue
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		sum += sumSamples(string(body), name, labels)
	}
	return sum
}

// sumSamples adds up the samples of metric name in Prometheus text format
// whose label set contains every one of labels (like `outcome="unknown"`).
func sumSamples(text, name string, labels []string) float64 {
	var sum float64
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		var v float64
		if _, err := fmt.Sscanf(fields[len(fields)-1], "%g", &v); err == nil {
			sum += v
		}
	}
	return sum
}

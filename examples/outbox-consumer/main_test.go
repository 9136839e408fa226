package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/testkit"
)

// The consumer binary, built once for every test that runs it.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	var err error
	binDir, err = os.MkdirTemp("", "outbox-consumer-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(binDir)
	os.Exit(code)
}

// consumerBinary builds this command with go build.
func consumerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "outbox-consumer")
		out, err := exec.CommandContext(context.Background(), "go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// TestImportsNothingInternal: the example is what forkers copy into another
// repository, where the API's internal packages do not exist.
func TestImportsNothingInternal(t *testing.T) {
	out, err := exec.CommandContext(context.Background(), "go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	for line := range strings.Lines(string(out)) {
		require.NotContains(t, line, "github.com/idemkeys/payments/internal/", "the example must not import the API's internal packages")
	}
}

// TestWireFormatMatchesThePublisher keeps wire.go's copy equal to what
// internal/outbox writes.
func TestWireFormatMatchesThePublisher(t *testing.T) {
	require.Equal(t, outbox.StreamKey, redisStream)
	require.Equal(t, outbox.FieldEventID, fieldEventID)
	require.Equal(t, outbox.FieldType, fieldType)
	require.Equal(t, outbox.FieldMerchantID, fieldMerchantID)
	require.Equal(t, outbox.FieldPayload, fieldPayload)
	require.Equal(t, outbox.FieldTraceParent, fieldTraceParent)

	require.Equal(t, outbox.JetStreamStream, natsStream)
	require.Equal(t, outbox.JetStreamConfig().Subjects, []string{natsSubjects})
	require.Equal(t, outbox.HeaderEventType, headerEventType)
	require.Equal(t, outbox.HeaderMerchantID, headerMerchantID)
	require.Equal(t, outbox.HeaderTraceParent, headerTraceParent)
	require.Equal(t, "Nats-Msg-Id", headerMsgID)
}

func TestLoadConfigRejectsBadInput(t *testing.T) {
	tests := []struct {
		name, key, value, want string
	}{
		{"sink", "OUTBOX_SINK", "kafka", "OUTBOX_SINK must be redis or nats"},
		{"claim after", "CONSUMER_CLAIM_AFTER", "soon", "CONSUMER_CLAIM_AFTER must be a positive duration"},
		{"claim after zero", "CONSUMER_CLAIM_AFTER", "0s", "CONSUMER_CLAIM_AFTER must be a positive duration"},
		{"batch", "CONSUMER_BATCH", "0", "CONSUMER_BATCH must be an integer from 1 to 10000"},
		{"group", "CONSUMER_GROUP", "a.b", "CONSUMER_GROUP must be a name"},
		{"log level", "LOG_LEVEL", "loud", "LOG_LEVEL must be"},
		{"crash point", "CONSUMER_CRASH_AT", "later", "CONSUMER_CRASH_AT must be empty, before-apply or after-commit"},
		{"crash count", "CONSUMER_CRASH_AFTER", "-1", "CONSUMER_CRASH_AFTER must be a positive integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(func(k string) string {
				if k == tt.key {
					return tt.value
				}
				return ""
			})
			require.ErrorContains(t, err, tt.want)
		})
	}
	cfg, err := loadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, "redis", cfg.sink)
	require.Equal(t, "sqlite:outbox-consumer.db", cfg.databaseURL)
	require.Equal(t, 30*time.Second, cfg.claimAfter)

	_, err = OpenStore(context.Background(), "mysql://root@localhost/x")
	require.ErrorContains(t, err, "CONSUMER_DATABASE_URL must be postgres://… or sqlite:<path>")
	require.NotContains(t, err.Error(), "root@", "no credentials in the message")
}

// consumerDB is a database of the consumer's own: a fresh PostgreSQL schema
// or SQLite file, dropped with the test. It returns the URL for
// CONSUMER_DATABASE_URL and a handle to count with.
func consumerDB(t *testing.T, dialect string) (string, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	switch dialect {
	case "sqlite":
		u := "sqlite:" + filepath.Join(t.TempDir(), "consumer.db")
		s, err := OpenStore(ctx, u)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return u, s.db
	case "postgres":
		admin, err := sql.Open("pgx", testkit.PostgresURL())
		require.NoError(t, err)
		t.Cleanup(func() { _ = admin.Close() })
		if err := admin.PingContext(ctx); err != nil {
			testkit.MissingService(t, "PostgreSQL", err)
		}
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		schema := "consumer_" + hex.EncodeToString(b)
		_, err = admin.ExecContext(ctx, "CREATE SCHEMA "+schema)
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
		pu, err := url.Parse(testkit.PostgresURL())
		require.NoError(t, err)
		q := pu.Query()
		q.Set("search_path", schema)
		pu.RawQuery = q.Encode()
		s, err := OpenStore(ctx, pu.String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return pu.String(), s.db
	}
	t.Fatalf("unknown dialect %q", dialect)
	return "", nil
}

var dialects = []string{"postgres", "sqlite"}

func TestStoreAppliesEachEventOnce(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			_, db := consumerDB(t, dialect)
			s := &Store{db: db}
			pay := Event{ID: "evt_1", Type: eventPaymentSucceeded, MerchantID: "mer_a", Payload: []byte(`{"id":"pay_1","amount":1250,"currency":"BRL"}`)}

			applied, err := s.Apply(ctx, pay)
			require.NoError(t, err)
			require.True(t, applied)
			applied, err = s.Apply(ctx, pay)
			require.NoError(t, err)
			require.False(t, applied, "the same id again is a duplicate")

			// Concurrent deliveries of one new event: one applies.
			other := pay
			other.ID = "evt_2"
			var wg sync.WaitGroup
			var mu sync.Mutex
			wins := 0
			for range 8 {
				wg.Go(func() {
					ok, err := s.Apply(ctx, other)
					if !assertNoError(t, err) {
						return
					}
					if ok {
						mu.Lock()
						wins++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			require.Equal(t, 1, wins)

			created := Event{ID: "evt_3", Type: "order.created", MerchantID: "mer_a", Payload: []byte(`{}`)}
			applied, err = s.Apply(ctx, created)
			require.NoError(t, err)
			require.True(t, applied, "other types are recorded, with no effect")

			for _, bad := range []Event{
				{ID: "evt_4", Type: eventPaymentSucceeded, MerchantID: "mer_a", Payload: []byte(`{"amount":`)},
				{ID: "evt_5", Type: eventPaymentSucceeded, MerchantID: "mer_a", Payload: []byte(`{"amount":0,"currency":"BRL"}`)},
			} {
				_, err = s.Apply(ctx, bad)
				require.ErrorIs(t, err, ErrBadEvent)
			}

			require.Equal(t, map[string][2]int64{"mer_a/BRL": {2500, 2}}, totals(t, db))
			require.Equal(t, 3, count(t, db, "SELECT count(*) FROM processed_events"), "bad events leave no trace")
		})
	}
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// testEvents are n events, every third an order.created and the others
// payment.succeeded for two merchants in two currencies, with the totals
// they must add up to: "merchant/currency" → {paid amount, payments}.
func testEvents(n int) ([]outbox.Event, map[string][2]int64) {
	events := make([]outbox.Event, n)
	want := map[string][2]int64{}
	for i := range events {
		merchant := []string{"mer_acme", "mer_globex"}[i%2]
		if i%3 == 0 {
			events[i] = outbox.Event{ID: fmt.Sprintf("evt_%03d", i), MerchantID: merchant, Type: "order.created", Payload: `{"id":"ord_1"}`}
			continue
		}
		currency := []string{"BRL", "USD"}[(i/2)%2]
		amount := int64(100 + i)
		events[i] = outbox.Event{ID: fmt.Sprintf("evt_%03d", i), MerchantID: merchant, Type: eventPaymentSucceeded,
			Payload: fmt.Sprintf(`{"id":"pay_%d","order_id":"ord_%d","amount":%d,"currency":%q,"status":"succeeded"}`, i, i, amount, currency)}
		k := merchant + "/" + currency
		want[k] = [2]int64{want[k][0] + amount, want[k][1] + 1}
	}
	return events, want
}

func totals(t *testing.T, db *sql.DB) map[string][2]int64 {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT merchant_id, currency, paid_amount, payments FROM merchant_paid_totals")
	require.NoError(t, err)
	defer rows.Close()
	got := map[string][2]int64{}
	for rows.Next() {
		var m, c string
		var amount, n int64
		require.NoError(t, rows.Scan(&m, &c, &amount, &n))
		got[m+"/"+c] = [2]int64{amount, n}
	}
	require.NoError(t, rows.Err())
	return got
}

func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRowContext(context.Background(), query, args...).Scan(&n))
	return n
}

// requireExactlyOnce checks the consumer's database after a run over
// events: one processed row per event, and totals that count each payment
// once.
func requireExactlyOnce(t *testing.T, db *sql.DB, events []outbox.Event, want map[string][2]int64) {
	t.Helper()
	require.Equal(t, len(events), count(t, db, "SELECT count(*) FROM processed_events"))
	for _, e := range events {
		require.Equal(t, 1, count(t, db, "SELECT count(*) FROM processed_events WHERE merchant_id = $1 AND event_id = $2", e.MerchantID, e.ID), e.ID)
	}
	require.Equal(t, want, totals(t, db))
}

// proc is one run of the consumer binary.
type proc struct {
	cmd  *exec.Cmd
	out  *testkit.SyncBuffer
	done chan struct{}
}

// startConsumer runs the binary with env added; it is killed when the test
// ends, and its output is logged if the test failed.
func startConsumer(t *testing.T, env ...string) *proc {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), consumerBinary(t))
	cmd.Env = append(os.Environ(), append([]string{"LOG_LEVEL=info"}, env...)...)
	p := &proc{cmd: cmd, out: &testkit.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("consumer output (%v):\n%s", env, p.out.String())
		}
	})
	return p
}

// requireKilledItself waits for the process to die by its own SIGKILL at
// the crash point.
func (p *proc) requireKilledItself(t *testing.T, point string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the consumer did not reach %s:\n%s", point, p.out.String())
	}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "want death by SIGKILL, got %v:\n%s", p.cmd.ProcessState, p.out.String())
	require.Contains(t, p.out.String(), "CONSUMER_CRASH_AT="+point)
}

// stop ends a run with SIGTERM and checks it exited cleanly.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("the consumer did not stop on SIGTERM")
	}
	require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), p.out.String())
}

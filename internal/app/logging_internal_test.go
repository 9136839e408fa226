package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/testkit"
)

func loadConfig(t testing.TB, env ...string) config.Config {
	t.Helper()
	cfg, err := config.Load(env)
	require.NoError(t, err)
	return cfg
}

// TestTextLogIsForPeople: development's log puts the message first, after
// the time of day; the level only when it is not INFO; attributes as
// key=value, quoted when they have spaces, groups as prefixes; no colour
// when the log is not a terminal.
func TestTextLogIsForPeople(t *testing.T) {
	var out bytes.Buffer
	log := LoggerFor(&out, loadConfig(t))
	log.Info("listening", "addr", "[::]:8080")
	log.With("component", "provider").WithGroup("call").Warn("slow answer", "took", "2s", "detail", "a b")
	log.Debug("not shown at info")

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2, out.String())
	require.Regexp(t, `^\d\d:\d\d:\d\d listening addr=\[::\]:8080$`, lines[0])
	require.Regexp(t, `^\d\d:\d\d:\d\d WARN slow answer component=provider call\.took=2s call\.detail="a b"$`, lines[1])
}

// TestTextLogValues: each kind of value as a person reads it, quoted only
// when it would not read as one word; on a terminal the level is coloured
// and the attributes dimmed, and a line without attributes has no dim codes.
func TestTextLogValues(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(newPeopleHandler(&out, slog.LevelInfo, false))
	log.Info("kinds", "n", -42, "u", uint64(7), "ok", true, "f", 1.5, "d", 1500*time.Millisecond,
		"empty", "", "tab", "a\tb", "eq", "a=b", "quote", `say "hi"`, "ctl", "bell\a", "word", "déjà-vu")
	require.Regexp(t, `^\d\d:\d\d:\d\d kinds n=-42 u=7 ok=true f=1.5 d=1.5s empty="" tab="a\\tb" eq="a=b" `+
		`quote="say \\"hi\\"" ctl="bell\\a" word=déjà-vu\n$`, out.String())

	out.Reset()
	log = slog.New(newPeopleHandler(&out, slog.LevelInfo, true)).With("component", "outbox")
	log.Warn("slow", "took", "2s")
	slog.New(newPeopleHandler(&out, slog.LevelInfo, true)).Info("bare")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^\d\d:\d\d:\d\d `+regexp.QuoteMeta(ansiYellow+"WARN"+ansiReset+" slow"+ansiDim+" component=outbox took=2s"+ansiReset)+`$`, lines[0])
	require.Regexp(t, `^\d\d:\d\d:\d\d bare$`, lines[1])
}

// TestJSONLogOnRequest: LOG_FORMAT=json, and production, keep JSON lines.
func TestJSONLogOnRequest(t *testing.T) {
	for _, cfg := range []config.Config{
		loadConfig(t, "LOG_FORMAT=json"),
		{AppEnv: config.AppEnvProduction, LogLevel: "info"},
	} {
		var out bytes.Buffer
		LoggerFor(&out, cfg).Info("listening", "addr", ":8080")
		var line map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &line), out.String())
		require.Equal(t, "listening", line["msg"])
	}
}

// TestFirstScreen: in development the first lines say, in plain words,
// which pages to open and where the demo keys are written down; then,
// short, what is not for production. No key or secret, no line a screen
// must wrap, no address but the API's.
func TestFirstScreen(t *testing.T) {
	cfg := loadConfig(t)
	var out bytes.Buffer
	announceDevelopment(cfg, LoggerFor(&out, cfg), "http://localhost:8080")
	screen := out.String()
	lines := strings.Split(strings.TrimSuffix(screen, "\n"), "\n")
	require.Contains(t, lines[0], "Open in a browser:")
	for i, want := range []string{
		"the checkout demo  *http://localhost:8080/demo$",
		"Swagger UI  *http://localhost:8080/swagger/index.html$",
		"the API  *http://localhost:8080$",
		"the mock provider's ledger  *http://localhost:8080/dev/provider/v1/ledger$",
	} {
		require.Regexp(t, want, lines[1+i])
	}
	require.Contains(t, lines[5], `API keys are in the README, under "Two commands"`)
	require.Contains(t, lines[6], "WARN Not for production")
	require.Contains(t, screen, "DEMO_SEED")
	require.Contains(t, screen, "PROVIDER_WEBHOOK_SECRET")
	require.Contains(t, screen, "LOG_KEY_SECRET")
	for _, line := range lines {
		require.LessOrEqual(t, len(line), 100, "a line a terminal must wrap: %q", line)
	}
	for _, secret := range []string{"sk_test_acme", "sk_test_globex", config.DemoWebhookSecret} {
		require.NotContains(t, screen, secret)
	}
	urls := regexp.MustCompile(`https?://[^\s"]+`).FindAllString(screen, -1)
	for _, u := range urls {
		require.True(t, strings.HasPrefix(u, "http://localhost:8080"), "an address that is not the API's: %s", u)
	}

	out.Reset()
	prod := config.Config{AppEnv: config.AppEnvProduction}
	announceDevelopment(prod, slog.New(slog.NewTextHandler(&out, nil)), "http://localhost:8080")
	require.Empty(t, out.String(), "production announces nothing")
}

// BenchmarkTextLogLine: what development's log spends on an access log
// line (the line every request writes at the default level), written to a
// sink that keeps nothing.
func BenchmarkTextLogLine(b *testing.B) {
	log := LoggerFor(io.Discard, loadConfig(b))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		log.LogAttrs(ctx, slog.LevelInfo, "request",
			slog.String("request_id", "1d8ad548730cb71c"),
			slog.String("method", "POST"),
			slog.String("route", "/v1/orders"),
			slog.String("path", "/v1/orders"),
			slog.Int("status", 201),
			slog.String("merchant_id", "mer_01JD4Z6X8Q2W"),
			slog.Duration("duration", 1234567*time.Nanosecond),
			slog.String("idempotency_key_hash", "4f2a9c81d03e"),
		)
	}
}

// countedWrites is a testkit.SyncBuffer that counts the Writes it gets,
// as a pipe would see them.
type countedWrites struct {
	testkit.SyncBuffer
	calls atomic.Int64
}

func (w *countedWrites) Write(p []byte) (int, error) {
	w.calls.Add(1)
	return w.SyncBuffer.Write(p)
}

func (w *countedWrites) all() (calls int, text string) { return int(w.calls.Load()), w.String() }

// TestBufferedLogKeepsEveryLineInOrder: lines logged at once from many
// goroutines all come out, whole, each goroutine's in the order it logged
// them, in fewer writes than lines; nothing is written before the delay
// or the size, and Close writes the rest, then lets lines through.
func TestBufferedLogKeepsEveryLineInOrder(t *testing.T) {
	var out countedWrites
	w := newLogWriter(&out, time.Hour) // only the size and Close write
	log := NewLogger(w, "info")
	const writers, each = 8, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				log.Info("request", "writer", g, "n", i)
			}
		})
	}
	wg.Wait()
	calls, _ := out.all()
	require.Positive(t, calls, "64 KiB of lines are written without waiting for the delay")
	require.NoError(t, w.Close())

	calls, text := out.all()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	require.Len(t, lines, writers*each)
	require.Less(t, calls, writers*each/100, "lines are written together")
	next := make([]int, writers)
	for _, l := range lines {
		var rec struct{ Writer, N int }
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "a whole line: %q", l)
		require.Equal(t, next[rec.Writer], rec.N, "writer %d's lines in order", rec.Writer)
		next[rec.Writer]++
	}

	log.Info("after close")
	calls2, text := out.all()
	require.Equal(t, calls+1, calls2, "after Close a line is written as it comes")
	require.Contains(t, text, `"msg":"after close"`)
}

// TestBufferedLogWritesWithinItsDelay: a line nobody follows is written by
// the timer, and the next one by the timer armed again.
func TestBufferedLogWritesWithinItsDelay(t *testing.T) {
	var out countedWrites
	w := newLogWriter(&out, time.Millisecond)
	defer w.Close()
	for _, msg := range []string{"first", "second"} {
		NewLogger(w, "info").Info(msg)
		require.Eventually(t, func() bool { _, text := out.all(); return strings.Contains(text, msg) },
			10*time.Second, time.Millisecond, "the line %q is written without Close", msg)
	}
}

// TestBufferedLogOnlyBehindAPipeOrFile: /dev/null, a character device that
// is not a terminal, and a pipe get their lines gathered (a terminal gets
// them as they come: TestBufferedLogWritesThroughToATerminal).
func TestBufferedLogOnlyBehindAPipeOrFile(t *testing.T) {
	// os/exec gives a child whose output nobody reads /dev/null: a
	// character device, not a terminal, so its lines are gathered too.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	w, done := BufferedLog(null)
	done()
	require.IsType(t, &logWriter{}, w)
	require.False(t, colourful(null), "no colour codes for /dev/null")

	r, pw, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer pw.Close()
	w, done = BufferedLog(pw)
	require.IsType(t, &logWriter{}, w)
	_, err = w.Write([]byte("line\n"))
	require.NoError(t, err)
	done()
	got := make([]byte, 5)
	_, err = io.ReadFull(r, got)
	require.NoError(t, err)
	require.Equal(t, "line\n", string(got), "what was gathered is written by the done func")
}

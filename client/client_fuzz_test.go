package client

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for what the client reads from the server's answers. Seed
// corpora are in testdata/fuzz/<FuzzName>.

// FuzzParseRetryAfter reads Retry-After. The wait it derives is never
// negative and never longer than a day, however far off the server says
// (a hostile or broken server must not park a client for years), and a
// plain number of seconds within a day is taken as it is.
func FuzzParseRetryAfter(f *testing.F) {
	f.Fuzz(func(t *testing.T, value string, nowUnix int64) {
		now := time.Unix(nowUnix%(1<<40), 0)
		d := parseRetryAfter(value, now)
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("parseRetryAfter(%q) = %s", value, d)
		}
		if secs, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64); err == nil && secs > 0 && secs <= 86400 {
			if d != time.Duration(secs)*time.Second {
				t.Fatalf("parseRetryAfter(%q) = %s", value, d)
			}
		}
	})
}

// FuzzToAPIError reads error answers, problem+json or not. It never panics,
// always keeps the status line's status, always has a title, takes at most
// maxDetail bytes of a body that is not a problem, and its message never
// carries the idempotency key.
func FuzzToAPIError(f *testing.F) {
	const key = "idem-fuzz-key-7Hq2"
	f.Fuzz(func(t *testing.T, status int, contentType string, body []byte) {
		status = 100 + (status%500+500)%500 // 100..599
		a := &answer{status: status, header: http.Header{"Content-Type": {contentType}}, body: body}
		e := toAPIError(a, key)
		if e.Status != status {
			t.Fatalf("status %d, answered %d", e.Status, status)
		}
		if e.Title == "" && http.StatusText(status) != "" {
			t.Fatalf("no title")
		}
		if !isProblem(contentType) && len(e.Detail) > maxDetail {
			t.Fatalf("detail of %d bytes", len(e.Detail))
		}
		if e.IdempotencyKey != key {
			t.Fatalf("key %q", e.IdempotencyKey)
		}
		if msg := e.Error(); strings.Contains(msg, key) && !strings.Contains(string(body), key) {
			t.Fatalf("the message carries the key: %s", msg)
		}
		_ = e.Retryable()
	})
}

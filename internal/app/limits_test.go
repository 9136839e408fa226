package app_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/testkit"
)

// wideOrder is a 900 KB order body whose items array has 300,000 empty
// elements: before bounded decoding such a body got a 29 MB answer listing
// every error of every item after seconds of work, inside an open
// transaction.
func wideOrder() string {
	return `{"customer_id":"cus_1","currency":"BRL","items":[` + strings.Repeat(`{},`, 300_000) + `{}]}`
}

// manyMembers is a body of n object members.
func manyMembers(n int) string {
	var sb strings.Builder
	sb.WriteString(`{"metadata":{`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"k%06d":"v"`, n-i)
	}
	sb.WriteString(`}}`)
	return sb.String()
}

// TestHostileBodiesAreBounded: the wide body and the many-member body get
// small 400s and change nothing, on both dialects.
func TestHostileBodiesAreBounded(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			api := apptest.Start(t, dbURL)

			wide := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(), wideOrder())
			require.Equal(t, 400, wide.Status, string(wide.Body[:min(len(wide.Body), 500)]))
			p := wide.JSON(t)
			require.Equal(t, "validation_failed", p["code"])
			require.LessOrEqual(t, len(p["errors"].([]any)), 20)
			require.Contains(t, p["errors"], map[string]any{"field": "items", "message": "must contain at most 100 items"})
			require.Less(t, len(wide.Body), 4096, "a small answer")

			members := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(), manyMembers(70_000))
			require.Equal(t, 400, members.Status)
			require.Equal(t, "validation_failed", members.JSON(t)["code"])
			require.Contains(t, members.JSON(t)["detail"], "more than 10000 object members")

			// An order with many wrong lines lists twenty and counts them.
			var sb strings.Builder
			sb.WriteString(`{"customer_id":"cus_1","currency":"BRL","items":[`)
			for i := range 100 {
				if i > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(`{"sku":"","name":"","quantity":0,"unit_amount":-1}`)
			}
			sb.WriteString(`]}`)
			many := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(), sb.String())
			require.Equal(t, 400, many.Status)
			require.Len(t, many.JSON(t)["errors"], 20)
			require.EqualValues(t, 400, many.JSON(t)["error_count"])

			require.Zero(t, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))
			require.Zero(t, testkit.Count(t, dbURL, "SELECT count(*) FROM idempotency_records"))
		})
	}
}

// TestServerCutsSlowAndIdleConnections: a body that does not arrive, headers
// that do not arrive and an idle keep-alive connection are each cut by the
// server within its deadlines, unauthenticated webhook included.
func TestServerCutsSlowAndIdleConnections(t *testing.T) {
	api := apptest.Start(t, testkit.DatabaseURL(t, "sqlite"),
		apptest.Env("HTTP_READ_HEADER_TIMEOUT=1s", "HTTP_READ_TIMEOUT=1s", "HTTP_IDLE_TIMEOUT=1s"))
	dial := func(t *testing.T) net.Conn {
		conn, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", api.Addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		// The test's own bound: far beyond the server's deadlines.
		require.NoError(t, conn.SetDeadline(time.Now().Add(15*time.Second)))
		return conn
	}
	closed := func(t *testing.T, r *bufio.Reader) {
		t.Helper()
		_, err := r.ReadByte()
		require.ErrorIs(t, err, io.EOF, "the server closed the connection")
	}

	t.Run("a webhook body that stalls", func(t *testing.T) {
		conn := dial(t)
		_, err := io.WriteString(conn, "POST /v1/webhooks/provider HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\":")
		require.NoError(t, err)
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err, "answered before the test's own deadline")
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		body, _ := io.ReadAll(resp.Body)
		require.Contains(t, string(body), `"code":"request_timeout"`)
		closed(t, r)
	})
	t.Run("an order body that stalls", func(t *testing.T) {
		conn := dial(t)
		_, err := io.WriteString(conn, "POST /v1/orders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk_test_acme\r\nIdempotency-Key: stall-1\r\n"+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"customer_id\":")
		require.NoError(t, err)
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		_, _ = io.Copy(io.Discard, resp.Body)
		closed(t, r)
	})
	t.Run("headers that stall", func(t *testing.T) {
		conn := dial(t)
		_, err := io.WriteString(conn, "POST /v1/orders HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		r := bufio.NewReader(conn)
		_, _ = http.ReadResponse(r, nil) // Go may answer 408 or just close
		closed(t, r)
	})
	t.Run("an idle keep-alive connection", func(t *testing.T) {
		conn := dial(t)
		_, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.Equal(t, 200, resp.StatusCode)
		closed(t, r)
	})
}

// TestOversizedWebhookIsRefusedWithinItsDeadline: a webhook that declares a
// body over its 64 KiB limit and sends it slowly gets its 413, and the
// connection is closed, when the webhook's own 5 s read deadline fires,
// while the server's HTTP_READ_TIMEOUT is a minute. net/http reads the
// rest of such a body (up to 256 KiB) before it answers; before, that
// read ran under HTTP_READ_TIMEOUT, and the answer and the close came only
// then (issue 45: 15.0 s each, at its default).
func TestOversizedWebhookIsRefusedWithinItsDeadline(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	api := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite), apptest.Env("HTTP_READ_TIMEOUT=60s", "HTTP_WRITE_TIMEOUT=90s"))
	conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", api.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	// The test's own bound: half the server's read timeout, six times the
	// webhook's deadline.
	start := time.Now()
	require.NoError(t, conn.SetDeadline(start.Add(30*time.Second)))
	_, err = io.WriteString(conn, "POST /v1/webhooks/provider HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"+
		"Provider-Signature: t=1,v1=00\r\nContent-Length: 100000\r\n\r\n{")
	require.NoError(t, err)
	// The rest of the body, a byte at a time, until the server closes.
	dripping := make(chan struct{})
	go func() {
		defer close(dripping)
		for {
			time.Sleep(200 * time.Millisecond)
			if _, err := io.WriteString(conn, "x"); err != nil {
				return
			}
		}
	}()

	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err, "answered before the test's own deadline")
	answered := time.Since(start)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	requireServerProblem(t, resp, body, http.StatusRequestEntityTooLarge, "request_too_large")
	require.True(t, resp.Close, "the answer closes the connection")

	_, err = r.ReadByte()
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server closed the connection before the test's deadline")
	closed := time.Since(start)
	<-dripping
	t.Logf("413 after %s, connection closed after %s (the webhook's read deadline is %s, HTTP_READ_TIMEOUT 60s)",
		answered.Round(time.Millisecond), closed.Round(time.Millisecond), handlers.WebhookReadTimeout)
}

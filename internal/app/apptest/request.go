package apptest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// OrderBody is a valid order: two coffees at 12.50 BRL, 25.00 in all.
const OrderBody = `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"SKU-1","name":"Coffee","quantity":2,"unit_amount":1250}],"metadata":{}}`

// Request is one request as a client sends it.
type Request struct {
	Method, URL string
	// APIKey is sent as "Authorization: Bearer <APIKey>" unless empty.
	APIKey string
	// Key is sent as Idempotency-Key unless empty.
	Key string
	// Body is sent with Content-Type: application/json unless empty (or
	// Header sets another type).
	Body string
	// Header holds name, value pairs: the first of a name replaces what the
	// fields above set, the next ones repeat the header.
	Header []string
	// Chunked sends the body without a Content-Length, so that only reading
	// it finds out how large it is.
	Chunked bool
	// Client sends the request; nil is http.DefaultClient.
	Client *http.Client
}

// Answer is a response, read whole.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as a JSON object, failing the test if it is not one.
func (a Answer) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.Body, &m), string(a.Body))
	return m
}

// Do sends r and reads the whole answer. It returns an error instead of
// failing a test, for polling loops and for requests whose connection may
// die on the way.
func Do(r Request) (Answer, error) {
	var body io.Reader = strings.NewReader(r.Body)
	if r.Chunked {
		body = io.MultiReader(body) // hides the length from net/http
	}
	req, err := http.NewRequestWithContext(context.Background(), r.Method, r.URL, body)
	if err != nil {
		return Answer{}, err
	}
	if r.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.APIKey)
	}
	if r.Key != "" {
		req.Header.Set("Idempotency-Key", r.Key)
	}
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(r.Header); i += 2 {
		name, value := r.Header[i], r.Header[i+1]
		if seen[name] {
			req.Header.Add(name, value)
		} else {
			req.Header.Set(name, value)
		}
		seen[name] = true
	}
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a := Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if err == nil {
		checkAnswer(req, sentWhole([]byte(r.Body)), a)
	}
	return a, err
}

// Send is Do that fails the test when no answer arrives.
func Send(t testing.TB, r Request) Answer {
	t.Helper()
	a, err := Do(r)
	require.NoError(t, err)
	return a
}

// Call is Send of the most common request: method on url as apiKey, under
// the idempotency key key, with a JSON body and header (name, value pairs,
// as in Request.Header); empty arguments are left out.
func Call(t testing.TB, method, url, apiKey, key, body string, header ...string) Answer {
	t.Helper()
	return Send(t, Request{Method: method, URL: url, APIKey: apiKey, Key: key, Body: body, Header: header})
}

// SendRaw writes raw to addr (host:port) as it is, for what an http.Client
// refuses to send (control characters in header values), and reads the
// answer.
func SendRaw(t testing.TB, addr, raw string) Answer {
	t.Helper()
	conn, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	// The server may answer and close before it has read everything (a
	// header over its limit): write on the side and read the answer.
	go func() { _, _ = io.WriteString(conn, raw) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Ledger asks the mock provider, over its API, for a list of charges or
// refunds (url is e.g. <provider>/v1/charges?reference=pay_…): the proof
// that nothing was charged twice.
func Ledger(t testing.TB, url string) []map[string]any {
	t.Helper()
	a := Call(t, "GET", url, "", "", "")
	require.Equal(t, 200, a.Status, string(a.Body))
	var list struct {
		Data []map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &list))
	return list.Data
}

var keySeq atomic.Int64

// NewKey returns an idempotency key no other call of the test binary gets.
func NewKey() string { return fmt.Sprintf("k-%d-%d", time.Now().UnixNano(), keySeq.Add(1)) }

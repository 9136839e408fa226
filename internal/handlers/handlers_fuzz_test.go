package handlers

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpguts"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/problem"
)

// The parsers of the HTTP layer, each fed arbitrary input. Seed corpora,
// hostile inputs included, are in testdata/fuzz/<FuzzName>. Run one with
//
//	go test -run '^$' -fuzz '^FuzzPrecondition$' -fuzztime 20s ./internal/handlers

// FuzzPrecondition reads If-Match headers. A refusal is always errIfMatch,
// and it refuses exactly what IfMatchPattern, the document's rule, does not
// match; an accepted header asks only for versions it spells as strong tags,
// and "*" or nothing asks for none. Every version's own ETag reads back as
// it.
func FuzzPrecondition(f *testing.F) {
	pattern := regexp.MustCompile(IfMatchPattern)
	f.Fuzz(func(t *testing.T, value string, version int64) {
		h := http.Header{}
		h.Set("If-Match", value)
		pre, err := toPrecondition(h)
		if httpguts.ValidHeaderFieldValue(value) {
			// What net/http lets through to the API: no control but tab.
			require.Equal(t, err == nil, pattern.MatchString(value), "%q: the server and the document disagree", value)
		}
		if err != nil {
			require.Same(t, errIfMatch, err)
		} else {
			if strings.TrimSpace(value) == "*" {
				require.False(t, pre.Required)
			} else {
				require.True(t, pre.Required)
			}
			for _, v := range pre.Versions {
				require.Positive(t, v)
				require.Contains(t, value, etag(v), "a version comes from a tag of its own")
			}
		}

		if version > 0 {
			h.Set("If-Match", etag(version))
			pre, err := toPrecondition(h)
			require.NoError(t, err)
			require.Equal(t, []int64{version}, pre.Versions)
			h.Set("If-Match", "W/"+etag(version))
			pre, err = toPrecondition(h)
			require.NoError(t, err)
			require.Empty(t, pre.Versions, "a weak tag never matches")
			require.True(t, pre.Required)
		}
	})
}

// FuzzBearerToken reads Authorization headers. What it accepts is a Bearer
// scheme (any case), one or more spaces and a non-empty token that ends the
// header; every such token reads back.
func FuzzBearerToken(f *testing.F) {
	f.Fuzz(func(t *testing.T, header string) {
		token, ok := bearerToken(header)
		if ok {
			require.NotEmpty(t, token)
			require.False(t, strings.HasPrefix(token, " "))
			require.True(t, strings.HasSuffix(header, token))
			require.True(t, strings.EqualFold(header[:len("Bearer")], "Bearer"))
			require.Equal(t, byte(' '), header[len("Bearer")])
			require.Equal(t, token, strings.TrimLeft(header[len("Bearer "):], " "))
		} else {
			require.Empty(t, token)
		}
		if header != "" && !strings.HasPrefix(header, " ") {
			got, ok := bearerToken("Bearer " + header)
			require.True(t, ok)
			require.Equal(t, header, got)
		}
	})
}

// FuzzListQuery reads the query string of GET /v1/orders. It refuses only a
// limit that is not a positive integer (in any decimal spelling of a whole
// number, as bodies take them: exact rational arithmetic is the oracle),
// always as a requestError naming limit, and passes the other parameters on
// as they are (the service judges them).
func FuzzListQuery(f *testing.F) {
	gin.SetMode(gin.TestMode)
	f.Fuzz(func(t *testing.T, rawQuery string) {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = &http.Request{Method: "GET", URL: &url.URL{Path: "/v1/orders", RawQuery: rawQuery}, Header: http.Header{}}
		q, err := toListQuery(c)
		raw, hasLimit := c.GetQuery("limit")
		r, isNumber := new(big.Rat).SetString(raw)
		isNumber = isNumber && decimalNumber.MatchString(raw)
		whole := isNumber && r.IsInt() && r.Num().IsInt64()
		var n int
		if whole {
			n = int(r.Num().Int64())
		}
		convErr := !whole
		if err != nil {
			var re *requestError
			require.ErrorAs(t, err, &re)
			require.Equal(t, "limit", re.fields[0].Field)
			require.True(t, hasLimit && (convErr || n < 1), "%q refused", raw)
			return
		}
		require.Equal(t, c.Query("starting_after"), q.StartingAfter)
		require.Equal(t, c.Query("customer_id"), q.CustomerID)
		if hasLimit {
			require.False(t, convErr, "%q accepted", raw)
			require.Equal(t, n, q.Limit)
			require.GreaterOrEqual(t, q.Limit, 1)
		} else {
			require.Zero(t, q.Limit, "no limit: the service's default")
		}
	})
}

// FuzzDecodeJSON is the whole body reader: the Content-Type check in front
// of it (requireJSON), then the body. A body not declared as application/json
// (alone, or with charset=utf-8) is refused with errUnsupportedMediaType
// whatever its bytes, and only such a body; anything else refused is a
// requestError; what is accepted is a JSON object (or nothing).
func FuzzDecodeJSON(f *testing.F) {
	gin.SetMode(gin.TestMode)
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest("POST", "/v1/orders", bytes.NewReader(body))
		c.Request.Header["Content-Type"] = []string{contentType}
		requireJSON()(c)
		mt, params, err := mime.ParseMediaType(contentType)
		declaredJSON := err == nil && mt == "application/json" && (len(params) == 0 || len(params) == 1 && strings.EqualFold(params["charset"], "utf-8"))
		if len(body) > 0 && !declaredJSON {
			require.True(t, c.IsAborted(), "accepted %q", contentType)
			require.Equal(t, http.StatusUnsupportedMediaType, w.Code)
			return
		}
		require.False(t, c.IsAborted(), "refused %q with a body of %d bytes", contentType, len(body))
		var req CreateOrderRequest
		if err := decodeJSON(c, &req); err != nil {
			var re *requestError
			require.ErrorAs(t, err, &re)
			return
		}
		if blank := len(bytes.TrimSpace(body)) == 0; !blank {
			var obj map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(body, &obj), "accepted %q", body)
		}
	})
}

// FuzzProviderEvent reads verified webhook bodies. A refusal is a
// requestError; an event it acts on has an id, a type it knows and exactly
// one object, every id and reference visible ASCII (so PostgreSQL can store
// and compare them); an event it ignores has a type it does not act on.
func FuzzProviderEvent(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, ok, err := toProviderEvent(body)
		if err != nil {
			var re *requestError
			require.ErrorAs(t, err, &re)
			require.False(t, ok)
			return
		}
		require.True(t, visibleASCII(ev.ID) && ev.ID != "")
		known := ev.Type == eventChargeSucceeded || ev.Type == eventChargeDeclined || ev.Type == eventRefundSucceeded
		require.Equal(t, known, ok)
		if !ok {
			return
		}
		require.True(t, (ev.Charge == nil) != (ev.Refund == nil), "exactly one object")
		if ch := ev.Charge; ch != nil {
			require.True(t, strings.HasPrefix(ev.Type, "charge."))
			require.Equal(t, ev.Type == eventChargeSucceeded, ch.Succeeded)
			for _, s := range []string{ch.ChargeID, ch.Reference} {
				require.True(t, s != "" && visibleASCII(s), "%q", s)
			}
			require.True(t, visibleASCII(ch.Key) && visibleASCII(ch.DeclineCode))
		}
		if rf := ev.Refund; rf != nil {
			require.Equal(t, eventRefundSucceeded, ev.Type)
			require.True(t, rf.Succeeded)
			for _, s := range []string{rf.RefundID, rf.Reference} {
				require.True(t, s != "" && visibleASCII(s), "%q", s)
			}
			require.True(t, visibleASCII(rf.Key))
		}
	})
}

// FuzzStoredResponse renders any stored answer for the key introspection
// route: the result always encodes as JSON, and its body decodes back to
// the stored bytes (as the same JSON value, or base64 of the exact bytes).
func FuzzStoredResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, status int, contentType, location string, body []byte) {
		h := http.Header{}
		if contentType != "" {
			h["Content-Type"] = []string{contentType}
		}
		if location != "" {
			h["Location"] = []string{location}
		}
		out := toStoredResponse(idempotency.Answer{Status: status, Header: h, Body: body, Final: true})
		encoded, err := json.Marshal(out)
		require.NoError(t, err, "the route must always be able to answer")
		require.True(t, json.Valid(encoded))
		switch out.BodyEncoding {
		case "json":
			require.True(t, isJSONContentType(contentType))
			require.Equal(t, string(body), string(out.Body), "the stored bytes, as they are")
		case "base64":
			var s string
			require.NoError(t, json.Unmarshal(out.Body, &s))
			got, err := base64.StdEncoding.DecodeString(s)
			require.NoError(t, err)
			require.Equal(t, string(body), string(got))
		default:
			t.Fatalf("unknown body encoding %q", out.BodyEncoding)
		}
		require.Equal(t, location != "", out.Location != nil)
	})
}

// FuzzRequestID checks the X-Request-Id filter: a client's id is kept (and
// echoed in a header and written to every log line) only when it is 1 to 64
// characters of letters, digits, '-', '_' and '.'.
func FuzzRequestID(f *testing.F) {
	f.Fuzz(func(t *testing.T, id string) {
		ok := validRequestID(id)
		want := id != "" && len(id) <= 64 && strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == ""
		require.Equal(t, want, ok, "%q", id)
		if ok {
			require.True(t, utf8.ValidString(id))
		}
	})
}

// FuzzRenderRequestError checks that whatever a client sends that the
// parsers refuse, the answer is a 400 problem+json that encodes.
func FuzzRenderRequestError(f *testing.F) {
	gin.SetMode(gin.TestMode)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req CreateOrderRequest
		err := decodeStrict(body, &req)
		if err == nil {
			return
		}
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest("POST", "/v1/orders", nil)
		RenderError(c, err)
		require.Equal(t, http.StatusBadRequest, w.Code)
		require.Equal(t, problem.ContentType, w.Header().Get("Content-Type"))
		var p problem.Problem
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
		require.Equal(t, problem.CodeValidationFailed, p.Code)
		require.False(t, errors.Is(err, errNoRoute))
	})
}

package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/payments"
)

// Authenticator resolves an API key to its merchant (merchants.Store).
type Authenticator interface {
	// Authenticate returns the merchant id of apiKey. It returns
	// merchants.ErrUnauthorized for an unknown key, or an error wrapping
	// database.ErrUnavailable when it cannot tell.
	Authenticate(ctx context.Context, apiKey string) (string, error)
}

// Keys of the values middleware leaves in the gin context. Unexported types,
// so no other package can collide with them.
type (
	merchantIDKey struct{}
	loggerKey     struct{}
)

// HeaderRequestID carries the request id, taken from the client when it
// sends a sane one, made up otherwise, and echoed in the answer.
const HeaderRequestID = "X-Request-Id"

// Attributes of the request's span, beside the HTTP ones its server span
// starts with. The key hash is the access log's; a span never holds a whole
// key.
const (
	AttrRequestID  = "request.id"
	AttrMerchantID = "merchant.id"
	AttrKeyHash    = "idempotency.key_hash"
)

// requestContext gives the request an id and a logger that carries it, and
// writes one access log line when the request is done. The line holds no
// header values: API keys never reach the logs, and an idempotency key only
// as hashKey's short keyed hash (idempotency_key_hash), which is enough to
// follow one key's retries through the logs. The request's span, if it is
// traced, gets the same id and hash, and the route instead of a path that
// holds a key.
//
// Any other path is logged and traced with each segment that is neither a
// word of the API's routes nor an id of the API's shape replaced by its
// keyed hash (scrubPath): a client that puts a key, an API key or anything
// else of its own in a path (/v1/orders/<key>) never has it written raw.
func requestContext(log *slog.Logger, hashKey func(key string) string, routes func() gin.RoutesInfo) gin.HandlerFunc {
	var words routeWords
	return func(c *gin.Context) {
		start := time.Now()
		id := c.GetHeader(HeaderRequestID)
		if !validRequestID(id) {
			id = newRequestID()
		}
		c.Header(HeaderRequestID, id)
		c.Set(loggerKey{}, &requestLogger{base: log, id: id})

		path, key := c.Request.URL.Path, c.GetHeader(idempotency.HeaderKey)
		scrubbed := false
		if k, ok := keyInPath(c.Request.URL); ok {
			// The path holds a key itself (whether a route matched or
			// not, however it is spelled): log the route instead, and
			// the hash of the path's key rather than the header's.
			path, key, scrubbed = routeIdempotencyKey, k, true
		} else if p := scrubPath(path, c.FullPath(), words.get(routes), hashKey); p != path {
			path, scrubbed = p, true
		}
		// The key's hash (an HMAC) is worked out only for a span or a log
		// line that carries it: with both off, a request pays nothing.
		keyHash := ""
		hashed := func() string {
			if keyHash == "" && key != "" {
				keyHash = hashKey(key)
			}
			return keyHash
		}
		span := trace.SpanFromContext(c.Request.Context())
		if span.IsRecording() {
			attrs := []attribute.KeyValue{attribute.String(AttrRequestID, id)}
			if h := hashed(); h != "" {
				attrs = append(attrs, attribute.String(AttrKeyHash, h))
			}
			if scrubbed {
				// Replaces the raw path the HTTP instrumentation put on
				// the span when it started it, before anything is exported.
				attrs = append(attrs, attribute.String("url.path", path), attribute.String("http.target", path))
			}
			span.SetAttributes(attrs...)
		}

		c.Next()

		if m := MerchantID(c); m != "" && span.IsRecording() {
			span.SetAttributes(attribute.String(AttrMerchantID, m))
		}
		if !log.Enabled(c.Request.Context(), slog.LevelInfo) {
			return
		}
		attrs := []slog.Attr{
			slog.String("request_id", id),
			slog.String("method", c.Request.Method),
			slog.String("route", c.FullPath()),
			slog.String("path", path),
			slog.Int("status", c.Writer.Status()),
			slog.String("merchant_id", MerchantID(c)),
			slog.Duration("duration", time.Since(start)),
		}
		if h := hashed(); h != "" {
			attrs = append(attrs, slog.String("idempotency_key_hash", h))
		}
		log.LogAttrs(c.Request.Context(), slog.LevelInfo, "request", attrs...)
	}
}

// routeWords is the set of the literal segments of the router's routes
// (v1, orders, payments, ...), gathered at the first request, when every
// route is registered.
type routeWords struct {
	once  sync.Once
	words map[string]bool
}

func (w *routeWords) get(routes func() gin.RoutesInfo) map[string]bool {
	w.once.Do(func() {
		w.words = map[string]bool{}
		for _, r := range routes() {
			for seg := range strings.SplitSeq(r.Path, "/") {
				if seg != "" && seg[0] != ':' && seg[0] != '*' {
					w.words[seg] = true
				}
			}
		}
	})
	return w.words
}

// idShape is the shape of the ids the API makes: a short lowercase prefix
// and a ULID (pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D).
var idShape = regexp.MustCompile(`^[a-z]{2,4}_[0-9A-HJKMNP-TV-Z]{26}$`)

// scrubPath is path as logs and traces may show it: each segment that is
// not a word of the routes nor of the API's id shape becomes "~" and its
// keyed hash. Routes that end in a wildcard of file names (Swagger UI, the
// development ledger) are shown as they are.
func scrubPath(path, route string, words map[string]bool, hashKey func(string) string) string {
	if strings.HasPrefix(route, "/swagger/") || strings.HasPrefix(route, "/dev/") {
		return path
	}
	// Nearly every path is words and ids only, and is shown as it is:
	// checked without splitting it, it costs no allocation.
	shown := true
	for seg := range strings.SplitSeq(path, "/") {
		if !shownSegment(seg, words) {
			shown = false
			break
		}
	}
	if shown {
		return path
	}
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if !shownSegment(seg, words) {
			segs[i] = "~" + hashKey(seg)
		}
	}
	return strings.Join(segs, "/")
}

// shownSegment reports whether scrubPath shows seg as it is.
func shownSegment(seg string, words map[string]bool) bool {
	return seg == "" || words[seg] || idShape.MatchString(seg)
}

// keysSegment is the path segment after which a path holds an idempotency key.
const keysSegment = "idempotency-keys"

// maxUnescapes bounds how many layers of percent-encoding keyInPath peels.
const maxUnescapes = 4

// keyInPath reports whether the path of u may hold an idempotency key, and
// returns it (empty when the path stops at the segment). The router matches
// the decoded path exactly, but the access log must not depend on that: a
// path that only resembles the route (/v1//idempotency-keys/K,
// /V1/Idempotency-Keys/K, /v1/./idempotency-keys/K, a segment
// percent-encoded once or more) is a 404 that would otherwise log the key
// raw. So the path is decoded until it stops changing, compared without
// case, and everything after the first "idempotency-keys" counts as the key.
// A false positive only costs a log line its path, which it then shows as
// the route.
func keyInPath(u *url.URL) (string, bool) {
	// The key as the route reads it, from the path decoded once, so that
	// the line's hash is the header's for the same key ("a%41" included).
	if i := strings.Index(strings.ToLower(u.Path), keysSegment); i >= 0 {
		return strings.TrimLeft(u.Path[i+len(keysSegment):], "/"), true
	}
	p := u.Path
	for range maxUnescapes {
		d, err := url.PathUnescape(p)
		if err != nil || d == p {
			break
		}
		p = d
	}
	if i := strings.Index(strings.ToLower(p), keysSegment); i >= 0 {
		return strings.TrimLeft(p[i+len(keysSegment):], "/"), true
	}
	return "", false
}

// requestLogger is the request's logger, which writes its request_id on
// every line, made on first use: most requests log nothing but the access
// log line, which names its request_id itself.
type requestLogger struct {
	base   *slog.Logger
	id     string
	logger *slog.Logger
}

// loggerFrom returns the request's logger; outside requestContext (a test
// calling RenderError on a bare context) the default logger.
func loggerFrom(c *gin.Context) *slog.Logger {
	v, ok := c.Get(loggerKey{})
	if !ok {
		return slog.Default()
	}
	l := v.(*requestLogger)
	if l.logger == nil {
		l.logger = l.base.With("request_id", l.id)
	}
	return l.logger
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b)
}

// recovery turns a panic into a logged 500 problem instead of a dropped
// connection. http.ErrAbortHandler is the one panic meant to abort the
// connection, so it goes on up.
func recovery() gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if err, ok := r.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(r)
			}
			err := fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			if c.Writer.Written() {
				// Too late for a problem: the status line is out.
				loggerFrom(c).ErrorContext(c.Request.Context(), "panic after the answer started", "error", err)
				c.Abort()
				return
			}
			RenderError(c, err)
		}()
		c.Next()
	}
}

// authenticate resolves Authorization: Bearer <key> to a merchant, whose id
// MerchantID then returns. It runs before anything else on /v1, so a request
// without a valid key learns nothing else (not even that its body is too
// large or invalid). A repeated Authorization header is refused: which of
// two credentials counts would otherwise depend on who reads the request (a
// proxy may take the last, Gin takes the first).
func authenticate(auth Authenticator) gin.HandlerFunc {
	return func(c *gin.Context) {
		values := c.Request.Header.Values("Authorization")
		if len(values) != 1 {
			RenderError(c, merchants.ErrUnauthorized)
			return
		}
		key, ok := bearerToken(values[0])
		if !ok {
			RenderError(c, merchants.ErrUnauthorized)
			return
		}
		// The client's address (as the trusted-proxy setting defines it)
		// keeps the budget of unknown keys (merchants.LimitUnknownKeys);
		// it is worked out only for a key the cache does not know.
		merchantID, err := auth.Authenticate(merchants.WithClientFunc(c.Request.Context(), c.ClientIP), key)
		if err != nil {
			RenderError(c, err)
			return
		}
		c.Set(merchantIDKey{}, merchantID)
	}
}

// bearerToken returns the credentials of a Bearer Authorization header; the
// scheme name is case-insensitive (RFC 9110, section 11.1).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

// MerchantID returns the merchant that authenticate found for the request,
// or "" on a route without authentication. The idempotency Keeper scopes
// keys with it.
func MerchantID(c *gin.Context) string {
	v, _ := c.Get(merchantIDKey{})
	id, _ := v.(string)
	return id
}

// limitBody bounds the request body to maxBytes. A Content-Length over the
// limit is refused at once, without reading; a body without one (chunked)
// is cut by http.MaxBytesReader, whose *http.MaxBytesError reaches
// RenderError from whoever reads the body (the idempotency middleware or the
// handler) and is answered 413 there.
//
// After the refusal, net/http reads up to 256 KiB of the rest of the body
// before it answers, to keep the connection, within the request's read
// deadline: a route whose body has a deadline of its own sets it first
// (readDeadline). Answering at once with Connection: close would not be
// better: net/http then closes the connection without its lingering
// close when a middleware has wrapped the body, and a client still
// sending is reset before it reads the answer.
func limitBody(maxBytes int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > maxBytes {
			RenderError(c, &http.MaxBytesError{Limit: maxBytes})
			return
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxBytes)
	}
}

// readDeadline gives the rest of a route's request, its body, d to arrive,
// from now: shorter than the server's read timeout, so that a sender
// dripping a body holds a connection for seconds, not minutes. It also
// bounds what net/http reads of a refused body before it answers.
func readDeadline(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(d))
	}
}

// maxIDLength bounds the resource ids (ord_…, pay_…) a path may carry.
const maxIDLength = 255

// knownIDs answers 404 for a path whose :id cannot be one the API made: ids
// are 1 to maxIDLength visible ASCII characters. It runs before the
// idempotency middleware and the handlers, so such an id reaches neither a
// query nor an idempotency record: PostgreSQL refuses NUL and invalid UTF-8
// in text, which would otherwise be a 500 instead of a 404.
func knownIDs() gin.HandlerFunc {
	return func(c *gin.Context) {
		if id, ok := c.Params.Get("id"); ok && (len(id) > maxIDLength || !visibleASCII(id)) {
			RenderError(c, payments.ErrNotFound)
		}
	}
}

// visibleASCII reports whether s is made of 0x21-0x7E only (empty or not).
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// unrouted answers a request no route serves with the error refusal
// gives. Under /v1 the API key is checked first, as on every /v1 route, so
// that probing paths or methods without a key tells nothing.
func unrouted(auth gin.HandlerFunc, refusal func(c *gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		err := refusal(c)
		if p := c.Request.URL.Path; p == "/v1" || strings.HasPrefix(p, "/v1/") {
			auth(c)
			if c.IsAborted() {
				return
			}
		}
		RenderError(c, err)
	}
}

// noRoute refuses a path no route matches.
func noRoute(*gin.Context) error { return errNoRoute }

// methodNotAllowed refuses a method no route of the path serves. Gin has
// already put the methods that are served in the Allow header; they move
// into the error, so that only the 405 carries them (a 401 to a caller
// without a key must not).
func methodNotAllowed(c *gin.Context) error {
	h := c.Writer.Header()
	allow := h.Get("Allow")
	h.Del("Allow")
	return &methodNotAllowedError{allow: allow}
}

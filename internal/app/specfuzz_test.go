package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	openapi "github.com/idemkeys/payments/api"
	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestSpecDrivenFuzz generates requests from the OpenAPI document's schemas
// and sends them to the API: each request the document allows must not be
// refused as invalid (400 validation_failed, unless one of the operation's
// x-validation-rules explains it, or 415), and each one it forbids (a
// mutation of a valid one: a required member left out, null, a wrong type, a
// value out of its pattern, bounds or enum, an unknown member, a body not
// declared as JSON, a bad parameter) must be refused with 400 or 415 and
// change nothing: the rows of every table the API writes, and the
// provider's ledger, are counted before and after. Whether a generated
// request is valid is the document's own verdict (apptest.ValidateRequest,
// the validator of the end-to-end tests), not the generator's.
//
// It is bounded: SPECFUZZ_REQUESTS (default 24) valid and as many invalid
// attempts per operation, from the seed SPECFUZZ_SEED (default 1; the
// log prints it). It logs how many requests of each kind it sent per
// operation.
func TestSpecDrivenFuzz(t *testing.T) {
	testkit.EndToEnd(t)
	perOp := envInt(t, "SPECFUZZ_REQUESTS", 24)
	seed := uint64(envInt(t, "SPECFUZZ_SEED", 1))
	t.Logf("spec fuzz: seed %d, %d valid and %d invalid attempts per operation", seed, perOp, perOp)

	dbURL := testkit.DatabaseURL(t, database.Postgres)
	// The fuzz sends new keys faster than RATE_LIMIT_NEW_KEYS allows (100
	// a second), and the limiter refuses a new key (429) before its body
	// is looked at: off, so that every answer is the body's own.
	api := apptest.Start(t, dbURL, apptest.WithSilentProvider(provider.Config{}), apptest.Env("RATE_LIMIT_NEW_KEYS=0"))
	const acme = "sk_test_acme"

	// What the paths name: real resources of acme's, so that valid
	// requests reach their use case.
	orderID := api.CreateOrder(t, acme)
	paidOrder := api.CreateOrder(t, acme)
	paid := api.Pay(t, paidOrder, apptest.NewKey(), "pm_card_visa")
	require.Equal(t, 201, paid.Status, string(paid.Body))
	paymentID := paid.JSON(t)["id"].(string)
	refundKey := apptest.NewKey()
	refunded := apptest.Call(t, "POST", api.URL+"/v1/payments/"+paymentID+"/refunds", acme, refundKey, `{"amount":1}`)
	require.Equal(t, 201, refunded.Status, string(refunded.Body))
	customer := apptest.Call(t, "POST", api.URL+"/v1/customers", acme, apptest.NewKey(), `{"email":"fuzz@example.com","name":"Fuzz"}`)
	require.Equal(t, 201, customer.Status, string(customer.Body))
	ids := map[string]string{
		"/v1/orders/{id}":                  orderID,
		"/v1/orders/{id}/items":            orderID,
		"/v1/orders/{id}/shipping-address": orderID,
		"/v1/orders/{id}/payments":         orderID,
		"/v1/payments/{id}":                paymentID,
		"/v1/payments/{id}/refunds":        paymentID,
		"/v1/refunds/{id}":                 refunded.JSON(t)["id"].(string),
		"/v1/customers/{id}":               customer.JSON(t)["id"].(string),
		"/v1/idempotency-keys/{key}":       refundKey,
	}

	var doc map[string]any
	require.NoError(t, json.Unmarshal(openapi.OpenAPI, &doc))
	g := &specGen{doc: doc, rnd: rand.New(rand.NewPCG(seed, seed)), patterns: map[string]*regexp.Regexp{}}
	rules, err := apptest.ValidationRules()
	require.NoError(t, err)

	tables := []string{"orders", "customers", "payments", "refunds", "idempotency_records", "outbox_events", "webhook_events"}
	counts := func() map[string]int64 {
		out := map[string]int64{}
		for _, table := range tables {
			out[table] = api.Count(t, "SELECT count(*) FROM "+table)
		}
		out["provider charges and refunds"] = int64(len(ledger(t, api)))
		return out
	}

	type tally struct{ valid, invalid, discarded int }
	sent := map[string]*tally{}
	var opNames []string
	for _, path := range sortedKeys(doc["paths"].(map[string]any)) {
		item := doc["paths"].(map[string]any)[path].(map[string]any)
		for _, method := range []string{"get", "post", "put"} {
			op, ok := item[method].(map[string]any)
			if !ok || !strings.HasPrefix(path, "/v1/") {
				continue
			}
			name := strings.ToUpper(method) + " " + path
			opNames = append(opNames, name)
			tl := &tally{}
			sent[name] = tl

			for range perOp {
				req, ok := g.request(method, path, op, ids)
				if !ok {
					tl.discarded++
					continue
				}
				if reasons := validate(t, api, req); len(reasons) > 0 {
					tl.discarded++ // the generator's miss, not the API's
					continue
				}
				tl.valid++
				a := send(t, api, req)
				require.NotEqual(t, http.StatusUnsupportedMediaType, a.Status, "%s: a valid request refused: %s\n%s", name, a.Body, req)
				require.Less(t, a.Status, 500, "%s: %s\n%s", name, a.Body, req)
				if a.Status == http.StatusBadRequest {
					require.True(t, apptest.Explained(name, a.Body), "%s: a request the document allows was refused as invalid: %s\n%s\nx-validation-rules: %v", name, a.Body, req, rules[name])
				}
			}

			before := counts()
			for range perOp {
				req, ok := g.request(method, path, op, ids)
				if !ok {
					tl.discarded++
					continue
				}
				what := g.mutate(&req, op)
				if what == "" || len(validate(t, api, req)) == 0 {
					tl.discarded++ // no mutation applies, or it left the request valid
					continue
				}
				tl.invalid++
				a := send(t, api, req)
				require.Contains(t, []int{400, 415}, a.Status, "%s, %s: a request the document forbids got %d %s\n%s", name, what, a.Status, a.Body, req)
			}
			require.Equal(t, before, counts(), "%s: a request the document forbids changed something", name)
		}
	}

	var total tally
	lines := []string{"spec fuzz: requests sent per operation (valid / invalid / generated but discarded)"}
	for _, name := range opNames {
		tl := sent[name]
		lines = append(lines, fmt.Sprintf("  %-45s %4d / %4d / %4d", name, tl.valid, tl.invalid, tl.discarded))
		total.valid, total.invalid, total.discarded = total.valid+tl.valid, total.invalid+tl.invalid, total.discarded+tl.discarded
	}
	lines = append(lines, fmt.Sprintf("  %-45s %4d / %4d / %4d", "total", total.valid, total.invalid, total.discarded))
	t.Log(strings.Join(lines, "\n"))
	for _, name := range opNames {
		require.Positive(t, sent[name].valid, "%s: no valid request could be generated", name)
	}
}

// fuzzRequest is one generated request.
type fuzzRequest struct {
	method, path string
	query        [][2]string
	header       [][2]string
	body         any // nil: no body
	rawBody      []byte
	contentType  string // "-": none
}

func (r fuzzRequest) String() string {
	return fmt.Sprintf("%s %s?%v headers %v content-type %q body %s", r.method, r.path, r.query, r.header, r.contentType, truncated(r.encoded()))
}

func (r fuzzRequest) encoded() []byte {
	if r.rawBody != nil {
		return r.rawBody
	}
	if r.body == nil {
		return nil
	}
	b, err := json.Marshal(r.body)
	if err != nil {
		panic(err)
	}
	return b
}

func truncated(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

// httpRequest builds the request; the webhook's is signed as the provider
// signs it.
func (r fuzzRequest) httpRequest(base string) *http.Request {
	body := r.encoded()
	req, err := http.NewRequest(r.method, base+r.path, strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	q := req.URL.Query()
	for _, kv := range r.query {
		q.Add(kv[0], kv[1])
	}
	req.URL.RawQuery = q.Encode()
	for _, kv := range r.header {
		req.Header.Set(kv[0], kv[1])
	}
	if body != nil && r.contentType != "-" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.path == "/v1/webhooks/provider" {
		req.Header.Set("Provider-Signature", provider.Sign("whsec_test", time.Now(), body))
	} else {
		req.Header.Set("Authorization", "Bearer sk_test_acme")
	}
	return req
}

func validate(t *testing.T, api *apptest.API, r fuzzRequest) []string {
	t.Helper()
	req := r.httpRequest("http://" + api.Addr)
	req.URL.Host, req.Host = "", ""
	req.URL.Scheme = ""
	reasons, err := apptest.ValidateRequest(req, r.encoded())
	require.NoError(t, err)
	return reasons
}

func send(t *testing.T, api *apptest.API, r fuzzRequest) apptest.Answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(r.httpRequest(api.URL))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return apptest.Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func ledger(t *testing.T, api *apptest.API) []map[string]any {
	t.Helper()
	a := apptest.Call(t, "GET", api.Provider.URL+"/v1/ledger", "", "", "")
	require.Equal(t, 200, a.Status, string(a.Body))
	var l struct {
		Charges []map[string]any `json:"charges"`
		Refunds []map[string]any `json:"refunds"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &l))
	return append(l.Charges, l.Refunds...)
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// specGen generates values from the document's schemas: the subset of JSON
// Schema the document uses ($ref, allOf, if/then, type and type arrays,
// const, enum, pattern, lengths, bounds, items, properties, required,
// additionalProperties, propertyNames).
type specGen struct {
	doc      map[string]any
	rnd      *rand.Rand
	patterns map[string]*regexp.Regexp
}

type schema = map[string]any

func (g *specGen) resolve(s schema) schema {
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		s = g.doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
	}
}

// request generates a request the generator means to be valid.
func (g *specGen) request(method, path string, op schema, ids map[string]string) (fuzzRequest, bool) {
	r := fuzzRequest{method: strings.ToUpper(method), path: path, contentType: "application/json"}
	if id, ok := ids[path]; ok {
		r.path = strings.NewReplacer("{id}", id, "{key}", id).Replace(path)
	}
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		param := p.(map[string]any)
		name, in := param["name"].(string), param["in"].(string)
		required, _ := param["required"].(bool)
		if in == "path" || (!required && g.rnd.IntN(2) == 0) {
			continue
		}
		if name == "Idempotency-Key" {
			r.header = append(r.header, [2]string{name, apptest.NewKey()})
			continue
		}
		if name == "Provider-Signature" {
			continue // signed when sent
		}
		v, ok := g.value(param["schema"].(map[string]any), 0)
		if !ok {
			return r, false
		}
		text := fmt.Sprint(v)
		switch in {
		case "query":
			r.query = append(r.query, [2]string{name, text})
		case "header":
			r.header = append(r.header, [2]string{name, text})
		}
	}
	if rb, ok := op["requestBody"].(map[string]any); ok {
		required, _ := rb["required"].(bool)
		if required || g.rnd.IntN(4) > 0 {
			s := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
			v, ok := g.value(s, 0)
			if !ok {
				return r, false
			}
			r.body = v
		}
	}
	return r, true
}

func (g *specGen) value(s schema, depth int) (any, bool) {
	s = g.resolve(s)
	if depth > 6 {
		return nil, false
	}
	if c, ok := s["const"]; ok {
		return c, true
	}
	if all, ok := s["allOf"].([]any); ok && s["type"] == nil && s["properties"] == nil {
		// allOf of a $ref and constraints on some of its members.
		v, ok := g.value(all[0].(map[string]any), depth+1)
		for _, extra := range all[1:] {
			g.applyThen(v, extra.(map[string]any), depth)
		}
		return v, ok
	}
	if enum, ok := s["enum"].([]any); ok {
		return enum[g.rnd.IntN(len(enum))], true
	}
	typ := s["type"]
	if types, ok := typ.([]any); ok {
		if slices.Contains(types, any("null")) && g.rnd.IntN(5) == 0 {
			return nil, true
		}
		typ = types[0]
	}
	switch typ {
	case "string":
		return g.str(s)
	case "integer":
		return g.integer(s), true
	case "boolean":
		return g.rnd.IntN(2) == 0, true
	case "array":
		lo, hi := bound(s, "minItems", 0), bound(s, "maxItems", 3)
		n := lo + g.rnd.IntN(max(1, min(hi, lo+3)-lo+1))
		n = min(n, hi)
		out := make([]any, n)
		for i := range out {
			v, ok := g.value(s["items"].(map[string]any), depth+1)
			if !ok {
				return nil, false
			}
			out[i] = v
		}
		return out, true
	case "object", nil:
		return g.object(s, depth)
	}
	return nil, false
}

func (g *specGen) object(s schema, depth int) (any, bool) {
	out := map[string]any{}
	required := map[string]bool{}
	for _, r := range asList(s["required"]) {
		required[r.(string)] = true
	}
	props, _ := s["properties"].(map[string]any)
	for _, name := range sortedKeys(props) {
		if !required[name] && g.rnd.IntN(2) == 0 {
			continue
		}
		v, ok := g.value(props[name].(map[string]any), depth+1)
		if !ok {
			return nil, false
		}
		out[name] = v
	}
	if extra, ok := s["additionalProperties"].(map[string]any); ok && len(props) == 0 {
		names, _ := s["propertyNames"].(map[string]any)
		if names == nil {
			names = schema{"type": "string"}
		}
		names = merged(schema{"type": "string"}, names)
		for range g.rnd.IntN(4) {
			k, ok := g.str(names)
			if !ok {
				continue
			}
			v, ok := g.value(extra, depth+1)
			if ok {
				out[k.(string)] = v
			}
		}
	}
	// if/then by a member's const (the webhook's type): pick a branch, or
	// none, and make the object take it.
	if all, ok := s["allOf"].([]any); ok {
		if pick := g.rnd.IntN(len(all) + 1); pick < len(all) {
			branch := all[pick].(map[string]any)
			cond := branch["if"].(map[string]any)["properties"].(map[string]any)
			for k, c := range cond {
				out[k] = c.(map[string]any)["const"]
			}
			g.applyThen(out, branch["then"].(map[string]any), depth)
		}
	}
	return out, true
}

// applyThen makes v obey then: its members' schemas replace the values.
func (g *specGen) applyThen(v any, then schema, depth int) {
	obj, ok := v.(map[string]any)
	if !ok {
		return
	}
	props, _ := then["properties"].(map[string]any)
	for k, sub := range props {
		sub := sub.(map[string]any)
		if inner, ok := sub["properties"]; ok && sub["allOf"] == nil && sub["$ref"] == nil && sub["type"] == nil {
			g.applyThen(obj[k], schema{"properties": inner}, depth+1)
			continue
		}
		if val, ok := g.value(sub, depth+1); ok {
			obj[k] = val
		}
	}
}

func merged(a, b schema) schema {
	out := schema{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

func bound(s schema, key string, def int) int {
	if v, ok := s[key].(float64); ok {
		return int(v)
	}
	return def
}

// integer picks a value within the bounds, sometimes at one of them, and
// sometimes spells it as 12.0 or 1.2e1: every spelling of a whole number is
// an integer.
func (g *specGen) integer(s schema) any {
	lo, hi := int64(-1_000_000), int64(1_000_000)
	if v, ok := s["minimum"].(float64); ok {
		lo = int64(max(v, -9e15))
	}
	if v, ok := s["maximum"].(float64); ok {
		hi = int64(min(v, 9e15))
	}
	if hi-lo > 1_000_000 && g.rnd.IntN(2) == 0 {
		hi = lo + 1_000_000
	}
	var n int64
	switch g.rnd.IntN(6) {
	case 0:
		n = lo
	case 1:
		n = hi
	default:
		n = lo + g.rnd.Int64N(hi-lo+1)
	}
	if g.rnd.IntN(4) == 0 {
		return json.Number(strconv.FormatInt(n, 10) + ".0")
	}
	return json.Number(strconv.FormatInt(n, 10))
}

// runes are what random text is made of: ASCII, accents, other scripts,
// the zero-width joiners the API allows, and an emoji.
var runes = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.,:;/#'\"()+=*&%$@!?éüßçñ日本語حمد\u200c\u200d😀")

func (g *specGen) str(s schema) (any, bool) {
	var re *regexp.Regexp
	if p, ok := s["pattern"].(string); ok {
		if re, ok = g.patterns[p]; !ok {
			re = regexp.MustCompile(p)
			g.patterns[p] = re
		}
	}
	lo, hi := bound(s, "minLength", 0), bound(s, "maxLength", 40)
	fits := func(c string) bool {
		n := utf8.RuneCountInString(c)
		return n >= lo && n <= hi && (re == nil || re.MatchString(c))
	}
	word := func(alphabet []rune, n int) string {
		out := make([]rune, n)
		for i := range out {
			out[i] = alphabet[g.rnd.IntN(len(alphabet))]
		}
		return string(out)
	}
	letters := runes[:62]
	for range 64 {
		var c string
		switch g.rnd.IntN(6) {
		case 0:
			c, _ = s["example"].(string)
		case 1: // an address
			c = word(runes[:75], 1+g.rnd.IntN(8)) + "@" + word(letters, 1+g.rnd.IntN(8)) + "." + word(letters, 2+g.rnd.IntN(3))
		case 2: // a token
			c = "pm_" + word(runes[:80], g.rnd.IntN(12))
		case 3: // entity tags, or any
			c = []string{"*", `"1"`, `W/"2", "3"`, ` "7" ,`, `"x y"`}[g.rnd.IntN(5)]
		default:
			c = word(runes, lo+g.rnd.IntN(max(1, min(hi, lo+16)-lo+1)))
		}
		if fits(c) {
			return c, true
		}
	}
	return nil, false
}

// mutate makes r invalid in one way that applies to its operation and
// says which, or returns "" when none applies.
func (g *specGen) mutate(r *fuzzRequest, op schema) string {
	var candidates []func() string
	if r.body != nil {
		body := r.body
		candidates = append(candidates,
			func() string {
				r.contentType = []string{"text/plain", "-", "application/merge-patch+json", "application/json; charset=latin1"}[g.rnd.IntN(4)]
				return "content type " + r.contentType
			},
			func() string { return g.mutateMember(body) },
			func() string { return g.mutateMember(body) },
			func() string { return g.mutateMember(body) },
		)
		if obj, ok := body.(map[string]any); ok {
			candidates = append(candidates, func() string { obj["zz_unknown"] = 1; return "an unknown member" })
		}
	}
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		param := p.(map[string]any)
		name, in := param["name"].(string), param["in"].(string)
		if in == "path" || name == "Provider-Signature" {
			continue
		}
		bad := map[string][]string{
			"limit": {"0", "101", "abc", "1.5", "-1"}, "customer_id": {"a b", strings.Repeat("c", 256)},
			"starting_after": {"a b", "é"}, "If-Match": {"garbage", `"1`, `"1"x`}, "Idempotency-Key": {"a b", "é", strings.Repeat("k", 256)},
		}[name]
		if len(bad) == 0 {
			continue
		}
		candidates = append(candidates, func() string {
			v := bad[g.rnd.IntN(len(bad))]
			if in == "query" {
				r.query = append(slices.DeleteFunc(r.query, func(kv [2]string) bool { return kv[0] == name }), [2]string{name, v})
			} else {
				r.header = append(slices.DeleteFunc(r.header, func(kv [2]string) bool { return kv[0] == name }), [2]string{name, v})
			}
			return fmt.Sprintf("%s %s=%q", in, name, v)
		})
	}
	if len(candidates) == 0 {
		return ""
	}
	return candidates[g.rnd.IntN(len(candidates))]()
}

// mutateMember breaks one member somewhere in v: leaves it out, makes it
// null, gives it another type, or puts it beyond its string rules or
// bounds. Whether that makes the request invalid is the document's call.
func (g *specGen) mutateMember(v any) string {
	type slot struct {
		path string
		obj  map[string]any
		key  string
	}
	var slots []slot
	var collect func(path string, v any)
	collect = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(v) {
				slots = append(slots, slot{path + "." + k, v, k})
				collect(path+"."+k, v[k])
			}
		case []any:
			for i, e := range v {
				collect(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	collect("", v)
	if len(slots) == 0 {
		return ""
	}
	s := slots[g.rnd.IntN(len(slots))]
	old := s.obj[s.key]
	switch g.rnd.IntN(5) {
	case 0:
		delete(s.obj, s.key)
		return "left out " + s.path
	case 1:
		s.obj[s.key] = nil
		return "null " + s.path
	case 2:
		if _, isString := old.(string); isString {
			s.obj[s.key] = json.Number("7")
		} else {
			s.obj[s.key] = "7"
		}
		return "another type at " + s.path
	case 3:
		switch old := old.(type) {
		case string:
			s.obj[s.key] = old + []string{"\u0000", "\u202e", " ", strings.Repeat("x", 300)}[g.rnd.IntN(4)]
		case json.Number:
			s.obj[s.key] = json.Number([]string{"1e30", "-1e30"}[g.rnd.IntN(2)])
		case []any:
			s.obj[s.key] = []any{}
		default:
			s.obj[s.key] = "7"
		}
		return "beyond the rules at " + s.path
	default:
		switch old := old.(type) {
		case json.Number:
			s.obj[s.key] = json.Number(strings.TrimSuffix(string(old), ".0") + ".5")
		case string:
			s.obj[s.key] = "ZZZ"
		default:
			delete(s.obj, s.key)
		}
		return "a fraction or an unknown value at " + s.path
	}
}

package idemcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Plan is what a run will send, said before it sends anything.
type Plan struct {
	// Checks lists every selected check, and whether it applies.
	Checks []PlannedCheck `json:"checks"`
	// Requests is the most requests the run sends: Writes plus Reads.
	Requests int `json:"requests"`
	// Writes are the requests to the endpoint (and its variants): each may
	// change something on a broken endpoint.
	Writes int `json:"writes"`
	// Reads are the GETs of the effects URL.
	Reads int `json:"reads"`
	// Operations is how many new keys (and Prepare calls) the run uses.
	Operations int `json:"operations"`
	// Effects is how many effects a correct endpoint makes.
	Effects int `json:"effects"`
	// WorstEffects is how many a broken endpoint could make: one per write.
	WorstEffects int `json:"worst_effects"`
	// Waits names the checks that wait, and how long at most.
	Waits []Wait `json:"waits,omitempty"`
}

// Wait is how long one check waits at most, on purpose.
type Wait struct {
	// ID is the check that waits.
	ID string `json:"id"`
	// Duration is the longest it waits: -pause, or a timeout the endpoint
	// states and its grace.
	Duration time.Duration `json:"duration_ns"`
	// When says when it waits, if not always.
	When string `json:"when,omitempty"`
}

// PlannedCheck is one check of a plan.
type PlannedCheck struct {
	ID         string `json:"id"`
	Applicable bool   `json:"applicable"`
	// Reason says why it does not apply.
	Reason string `json:"reason,omitempty"`
}

// String is the plan in a few lines, for a person about to run it.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan: at most %d requests (%d to the endpoint, %d reads of the effects URL) under %d new keys.\n",
		p.Requests, p.Writes, p.Reads, p.Operations)
	fmt.Fprintf(&b, "effects: a correct endpoint makes %d; a broken one could make up to %d (one per request to the endpoint).\n",
		p.Effects, p.WorstEffects)
	if len(p.Waits) > 0 {
		var waits []string
		for _, w := range p.Waits {
			s := fmt.Sprintf("%s %s", w.ID, w.Duration.Round(100*time.Millisecond))
			if w.When != "" {
				s += " " + w.When
			}
			waits = append(waits, s)
		}
		fmt.Fprintf(&b, "waits: %s.\n", strings.Join(waits, ", "))
	}
	var skipped []string
	for _, c := range p.Checks {
		if !c.Applicable {
			skipped = append(skipped, c.ID+" ("+c.Reason+")")
		}
	}
	fmt.Fprintf(&b, "checks: %d, of which not applicable: ", len(p.Checks))
	if len(skipped) == 0 {
		b.WriteString("none")
	} else {
		b.WriteString(strings.Join(skipped, ", "))
	}
	b.WriteString("\n")
	return b.String()
}

// ErrNotAllowed is returned by Run when the Config does not allow effects,
// or its plan exceeds MaxRequests; nothing was sent.
var ErrNotAllowed = errors.New("the run is not allowed")

// PlanFor returns the plan of running the checks named by ids (all of them
// when ids is empty) against cfg, without sending anything.
func PlanFor(cfg Config, ids ...string) (Plan, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Plan{}, err
	}
	selected, err := selection(ids)
	if err != nil {
		return Plan{}, err
	}
	return plan(&cfg, selected), nil
}

func plan(cfg *Config, selected map[string]bool) Plan {
	var p Plan
	for _, c := range catalogue {
		if !selected[c.ID] {
			continue
		}
		ok, why := applicable(cfg, c.ID)
		p.Checks = append(p.Checks, PlannedCheck{ID: c.ID, Applicable: ok, Reason: why})
	}
	costs := []cost{preflightCost(cfg)}
	for _, s := range scenarios {
		if s.wanted(cfg, selected) {
			costs = append(costs, s.cost(cfg, selected))
		}
	}
	for _, c := range costs {
		p.Writes += c.writes
		p.Reads += c.reads
		p.Operations += c.ops
		p.Effects += c.effects
	}
	p.Requests = p.Writes + p.Reads
	p.WorstEffects = p.Writes
	for _, w := range []Wait{
		{ID: PauseReplay, Duration: cfg.Pause},
		{ID: NoCrashLock, Duration: cfg.LockTimeout + grace(cfg.LockTimeout), When: "if a failure locks the key"},
		{ID: ExpiryRace, Duration: cfg.TTL + grace(cfg.TTL)},
	} {
		if ok, _ := applicable(cfg, w.ID); ok && selected[w.ID] {
			p.Waits = append(p.Waits, w)
		}
	}
	return p
}

// selection turns ids into a set, every check when ids is empty.
func selection(ids []string) (map[string]bool, error) {
	selected := map[string]bool{}
	for _, id := range ids {
		if _, ok := Lookup(id); !ok {
			return nil, fmt.Errorf("%w: no check %q", ErrConfig, id)
		}
		selected[id] = true
	}
	if len(selected) == 0 {
		for _, c := range catalogue {
			selected[c.ID] = true
		}
	}
	return selected, nil
}

// applicable says whether check id can run with cfg, and why not.
func applicable(cfg *Config, id string) (bool, string) {
	switch id {
	case KeyMissing:
		if cfg.KeyOptional {
			return false, "keys are optional at this endpoint (-key-optional)"
		}
	case ReuseBody:
		if len(cfg.BodyVariant) == 0 {
			return false, "no -body-variant"
		}
	case ReuseLoose:
		if len(looseVariants([]byte(placeholder.ReplaceAllString(string(cfg.Body), "x")))) == 0 {
			return false, "the body holds no number, true or false to send loosely equal"
		}
	case ReusePath:
		if cfg.URLVariant == "" {
			return false, "no -url-variant"
		}
	case ReuseMethod:
		if cfg.MethodVariant == "" {
			return false, "no -method-variant"
		}
	case FingerprintCanonical:
		if _, ok := reorder([]byte(placeholder.ReplaceAllString(string(cfg.Body), "x"))); !ok {
			return false, "the body is not a JSON object with two members or more"
		}
	case Credentials:
		if len(cfg.Header2) == 0 {
			return false, "no -H2"
		}
	case NoBurn:
		if len(cfg.InvalidBody) == 0 {
			return false, "no -body-invalid"
		}
	case No5xxReplay, NoCrashLock:
		if len(cfg.FaultBody) == 0 {
			return false, "no -body-5xx"
		}
	case ExpiryRace:
		if cfg.TTL == 0 {
			return false, "no -ttl"
		}
	case ReplayErrorType:
		if len(cfg.InvalidBody) == 0 && len(cfg.FaultBody) == 0 {
			return false, "no -body-invalid or -body-5xx"
		}
	}
	return true, ""
}

// Run runs the checks named by ids (every check when ids is empty) against
// the endpoint cfg describes and returns the report. It sends nothing and
// returns an error wrapping ErrNotAllowed when cfg.AllowEffects is unset or
// the plan exceeds cfg.MaxRequests, and one wrapping ErrConfig when cfg
// cannot run. It first sends the request every check is built on, and
// returns an error wrapping ErrPreflight, saying what to fix, when that
// request is not answered 2xx (or a declared FinalStatus). A check that
// could not run later is reported with the Error verdict, not returned as
// an error.
func Run(ctx context.Context, cfg Config, ids ...string) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	selected, err := selection(ids)
	if err != nil {
		return nil, err
	}
	p := plan(&cfg, selected)
	if !cfg.AllowEffects {
		return nil, fmt.Errorf("%w: the checks send requests that a broken endpoint may execute; allow effects to run them", ErrNotAllowed)
	}
	if cfg.MaxRequests > 0 && p.Requests > cfg.MaxRequests {
		return nil, fmt.Errorf("%w: the plan sends up to %d requests, over the limit of %d", ErrNotAllowed, p.Requests, cfg.MaxRequests)
	}
	client := DefaultClient()
	if cfg.Client != nil {
		c := *cfg.Client
		c.CheckRedirect = noRedirects
		client = &c
	}
	r := &runner{cfg: &cfg, client: client, limit: cfg.MaxRequests, planned: p.Requests}
	red := newRedactor(&cfg)
	rep := &Report{Target: cfg.Method + " " + red.text(RedactURL(cfg.URL)), Started: time.Now().UTC(), Plan: p}

	var steps []scenario
	for _, s := range scenarios {
		if s.wanted(&cfg, selected) {
			steps = append(steps, s)
		}
	}
	r.mu.Lock()
	r.steps, r.current = len(steps), "the first request"
	r.mu.Unlock()
	if err := r.preflight(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrPreflight, red.text(err.Error()))
	}
	results := map[string]Result{}
	for i, s := range steps {
		r.mu.Lock()
		r.step, r.steps, r.current = i+1, len(steps), strings.Join(s.selectedIDs(selected), ", ")
		r.mu.Unlock()
		r.report()
		for _, res := range s.run(ctx, r, selected) {
			results[res.ID] = res
		}
	}
	for _, c := range catalogue {
		if !selected[c.ID] {
			continue
		}
		res, ok := results[c.ID]
		if !ok {
			_, why := applicable(&cfg, c.ID)
			res = Result{Check: c, Verdict: NotApplicable, Reason: sentences([]string{why})}
		}
		// One place removes the credentials from everything a report
		// shows, so that no check's wording can let one through.
		rep.Results = append(rep.Results, red.result(res))
	}
	rep.Elapsed = time.Since(rep.Started)
	rep.Requests = r.sentCount()
	return rep, nil
}

// runner sends the requests of one run and counts them.
type runner struct {
	cfg     *Config
	client  *http.Client
	limit   int
	planned int

	mu          sync.Mutex
	sent        int
	step, steps int
	current     string
}

func (r *runner) sentCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent
}

// report tells Progress where the run is. The caller must not hold mu.
func (r *runner) report() {
	if r.cfg.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cfg.Progress(Progress{Check: r.current, Step: r.step, Steps: r.steps, Sent: r.sent, Planned: r.planned})
}

// operation is one logical operation: a new key and the request with its
// placeholders filled in.
type operation struct {
	key        string
	url        string
	urlVariant string
	effectsURL string
	body       []byte
	variant    []byte
	invalid    []byte
	fault      []byte
}

// newOperation makes a new key and fills the placeholders.
func (r *runner) newOperation(ctx context.Context) (*operation, error) {
	vars := map[string]string{}
	if r.cfg.Prepare != nil {
		v, err := r.cfg.Prepare(ctx)
		if err != nil {
			return nil, fmt.Errorf("prepare an operation: %w", err)
		}
		for k, val := range v {
			vars[k] = val
		}
	}
	vars["unique"] = randomHex(8)
	var missing []string
	fill := func(s string) string {
		return placeholder.ReplaceAllStringFunc(s, func(m string) string {
			name := m[2 : len(m)-2]
			v, ok := vars[name]
			if !ok {
				missing = append(missing, m)
				return m
			}
			return v
		})
	}
	fillBytes := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		return []byte(fill(string(b)))
	}
	op := &operation{
		key:        newKey(),
		url:        fill(r.cfg.URL),
		urlVariant: fill(r.cfg.URLVariant),
		effectsURL: fill(r.cfg.EffectsURL),
		body:       fillBytes(r.cfg.Body),
		variant:    fillBytes(r.cfg.BodyVariant),
		invalid:    fillBytes(r.cfg.InvalidBody),
		fault:      fillBytes(r.cfg.FaultBody),
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no value from Prepare for %s", strings.Join(missing, ", "))
	}
	return op, nil
}

// call is one request a scenario sends.
type call struct {
	note   string
	method string // empty: the Config's method
	url    string
	body   []byte
	key    string
	noKey  bool // send no key header at all
	second bool // send Header2's credentials
}

// answer is a request's answer, whole for the checks and trimmed for the
// report.
type answer struct {
	status  int
	header  http.Header
	body    []byte
	elapsed time.Duration
	err     error
	ex      Exchange
}

func (a *answer) ok() bool      { return a.err == nil && a.status >= 200 && a.status < 300 }
func (a *answer) refused() bool { return a.err == nil && a.status >= 400 && a.status < 500 }
func (a *answer) is5xx() bool   { return a.err == nil && a.status >= 500 }

// resource names the resource an answer is about: its Location, or else its
// JSON "id"; empty when it names none.
func (a *answer) resource() string {
	if loc := a.header.Get("Location"); loc != "" {
		return loc
	}
	return jsonID(a.body)
}

// identity names the resource an answer is about for comparing: its JSON
// "id", or else its Location; empty when it names none. (resource prefers
// the Location, which reads better in a reason.)
func (a *answer) identity() string {
	if id := jsonID(a.body); id != "" {
		return id
	}
	return a.header.Get("Location")
}

// replayMarkers are the headers APIs use to mark a replayed answer:
// Stripe's and this project's first, then the variants seen elsewhere.
var replayMarkers = []string{"Idempotent-Replayed", "Idempotency-Replayed", "X-Idempotent-Replayed", "X-Idempotency-Replayed"}

// replayed reports whether the answer is marked as a replay.
func (a *answer) replayed() bool {
	for _, h := range replayMarkers {
		if v := strings.TrimSpace(a.header.Get(h)); strings.EqualFold(v, "true") || v == "1" {
			return true
		}
	}
	return false
}

// problemJSON reports whether the answer is an RFC 9457 problem.
func (a *answer) problemJSON() bool {
	mt, _, _ := mime.ParseMediaType(a.header.Get("Content-Type"))
	return mt == "application/problem+json"
}

// describe names an answer in a reason: "422 idempotency_key_reused",
// "201 /v1/orders/ord_1", or the transport error.
func (a *answer) describe() string {
	if a.err != nil {
		return "no answer (" + a.err.Error() + ")"
	}
	s := fmt.Sprint(a.status)
	if a.status >= 400 {
		if code := problemCode(a.body); code != "" {
			s += " " + code
		}
		return s
	}
	if res := a.resource(); res != "" {
		s += " " + res
	}
	if a.replayed() {
		s += ", marked replayed"
	}
	return s
}

// evidenceHeaders are the answer headers a report shows.
var evidenceHeaders = append([]string{"Content-Type", "Location", "ETag", "Retry-After"}, replayMarkers...)

const trimAt = 300

// do sends one request, within the run's limit, and never twice.
func (r *runner) do(ctx context.Context, c call) *answer {
	method := c.method
	if method == "" {
		method = r.cfg.Method
	}
	a := &answer{ex: Exchange{Note: c.note, Method: method, URL: c.url, RequestBody: trim(c.body)}}
	if !c.noKey {
		key := c.key
		a.ex.Key = &key
	}
	if c.second {
		a.ex.Credentials = "H2"
	}

	r.mu.Lock()
	if r.limit > 0 && r.sent >= r.limit {
		r.mu.Unlock()
		a.err = fmt.Errorf("not sent: the run reached its limit of %d requests", r.limit)
		a.ex.Error = a.err.Error()
		return a
	}
	r.sent++
	r.mu.Unlock()
	r.report()

	req, err := r.newRequest(ctx, method, c)
	if err != nil {
		a.err = err
		a.ex.Error = err.Error()
		return a
	}
	start := time.Now()
	resp, err := r.client.Do(req)
	if err == nil {
		a.body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		a.status, a.header = resp.StatusCode, resp.Header
	}
	a.elapsed = time.Since(start)
	a.ex.ElapsedMS = float64(a.elapsed.Microseconds()) / 1000
	if err != nil {
		a.err = err
		a.ex.Error = err.Error()
		return a
	}
	a.ex.Status = a.status
	a.ex.Body = trim(a.body)
	for _, h := range evidenceHeaders {
		if v := a.header.Get(h); v != "" {
			if a.ex.Header == nil {
				a.ex.Header = map[string]string{}
			}
			a.ex.Header[h] = v
		}
	}
	return a
}

// newRequest builds the request of c. Its GetBody is left nil on purpose:
// net/http's Transport resends a request carrying an Idempotency-Key on a
// broken reused connection when it can rewind the body, and the checker
// must send exactly the requests it planned.
func (r *runner) newRequest(ctx context.Context, method string, c call) (*http.Request, error) {
	var body io.Reader
	if len(c.body) > 0 {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, body)
	if err != nil {
		return nil, err
	}
	req.GetBody = nil
	req.Header = r.cfg.Header.Clone()
	if len(c.body) == 0 {
		req.Header.Del("Content-Type")
	}
	if c.second {
		req.Header = r.cfg.withHeader2(req.Header)
	}
	if !c.noKey {
		// Set through the map, so that an empty or odd key is sent as it is.
		req.Header[http.CanonicalHeaderKey(r.cfg.KeyHeader)] = []string{c.key}
	}
	return req, nil
}

// effects reads the effects count of op; ok is false (and a is the
// evidence) when the effects URL did not answer a count.
func (r *runner) effects(ctx context.Context, op *operation, note string) (count int, a *answer, err error) {
	a = r.do(ctx, call{note: note, method: http.MethodGet, url: op.effectsURL, noKey: true})
	if a.err != nil {
		return 0, a, fmt.Errorf("the effects URL did not answer: %w", a.err)
	}
	if a.status != http.StatusOK {
		return 0, a, fmt.Errorf("the effects URL answered %d, not 200", a.status)
	}
	n, err := countAt(a.body, r.cfg.EffectsPointer)
	if err != nil {
		return 0, a, err
	}
	return n, a, nil
}

// newKey returns a random key in the shape of a UUID (version 4): 36
// characters, which every implementation's length rule accepts (Stripe's
// 255, Adyen's 64, PayPal's 38, Fiber's exact 36).
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// trim cuts a body for a report.
func trim(b []byte) string {
	return trimTo(strings.TrimSpace(strings.ToValidUTF8(string(b), "?")), trimAt)
}

// trimTo cuts s to at most n bytes, on a character's boundary.
func trimTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

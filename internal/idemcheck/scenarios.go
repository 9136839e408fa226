package idemcheck

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// A scenario is a short sequence of requests that several checks judge
// together: the first request and its replay serve four checks, so they are
// sent once. Each check belongs to exactly one scenario.
type scenario struct {
	ids []string
	// cost is what the scenario sends for the selected, applicable checks.
	cost func(cfg *Config, sel map[string]bool) cost
	// run sends the requests and returns a result for each selected check
	// it judged; a check it leaves out is reported as not applicable.
	run func(ctx context.Context, r *runner, sel map[string]bool) []Result
}

type cost struct {
	writes, reads, ops, effects int
}

// scenarios run in this order.
var scenarios = []scenario{
	{ids: []string{KeyMissing}, cost: fixedCost(1, 1, 0, true), run: runKeyMissing},
	{ids: []string{KeyInvalid}, cost: fixedCost(len(invalidKeys()), 1, 0, true), run: runKeyInvalid},
	{ids: []string{FirstRequest, ReplayEffect, ReplaySame, ReplayMarked}, cost: replayCost, run: runReplay},
	{ids: []string{ReuseBody, ReuseLoose, ReusePath, ReuseMethod}, cost: reuseCost, run: runReuse},
	{ids: []string{FingerprintCanonical}, cost: fixedCost(3, 1, 1, false), run: runCanonical},
	{ids: []string{Concurrent}, cost: copiesCost(0, 1), run: runConcurrent},
	{ids: []string{Credentials}, cost: fixedCost(3, 1, 2, false), run: runCredentials},
	{ids: []string{NoBurn, No5xxReplay, NoCrashLock, ReplayErrorType}, cost: failuresCost, run: runFailures},
	{ids: []string{PauseReplay}, cost: fixedCost(2, 1, 1, false), run: runPause},
	{ids: []string{ExpiryRace}, cost: copiesCost(1, 2), run: runExpiry},
	{ids: []string{Timing}, cost: fixedCost(1+timingReplays, 1, 1, false), run: runTiming},
}

// wanted reports whether any of the scenario's checks is selected and
// applicable.
func (s scenario) wanted(cfg *Config, sel map[string]bool) bool {
	for _, id := range s.ids {
		if ok, _ := applicable(cfg, id); sel[id] && ok {
			return true
		}
	}
	return false
}

func (s scenario) selectedIDs(sel map[string]bool) []string {
	var ids []string
	for _, id := range s.ids {
		if sel[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// fixedCost is a scenario that sends the same whatever is selected, with
// two reads of the effects URL (before and after) when readsEffects.
func fixedCost(writes, ops, effects int, readsEffects bool) func(*Config, map[string]bool) cost {
	return func(cfg *Config, _ map[string]bool) cost {
		c := cost{writes: writes, ops: ops, effects: effects}
		if readsEffects && cfg.EffectsURL != "" {
			c.reads = 2
		}
		return c
	}
}

func runKeyMissing(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, KeyMissing)
	j := js[KeyMissing]
	op, ok := r.operation(ctx, js)
	if !ok {
		return results(js)
	}
	before, ok := r.count(ctx, op, "effects before", js)
	if !ok {
		return results(js)
	}
	a := r.do(ctx, call{url: op.url, body: op.body, noKey: true})
	after, ok := r.count(ctx, op, "effects after", js)
	if !ok {
		return results(js)
	}
	j.show(a)
	switch {
	case a.err != nil:
		j.error("the request without a key got no answer: %v", a.err)
	case a.status < 400:
		j.fail("the request without a key was executed: answered %s", a.describe())
	case a.is5xx():
		j.advise("the request without a key was answered %s: a missing key is the client's error, 400 (§2.7)", a.describe())
	case a.status != http.StatusBadRequest:
		j.advise("refused with %s; §2.7 says 400", a.describe())
	case !a.problemJSON():
		j.advise("refused with 400, but with %q rather than a problem body (application/problem+json)", a.header.Get("Content-Type"))
	default:
		j.note("refused with %s, application/problem+json", a.describe())
	}
	if after > before {
		j.fail("the request without a key changed something: %s counted", plural(after-before, "new effect"))
	}
	return results(js)
}

// invalidKeys returns the malformed keys KeyInvalid sends, new for each
// run: a fixed key would be refused on a second run as "already used" by an
// endpoint that stored it on the first, which is no sign that it validates
// keys. The last two are as long as a valid key, so that an endpoint that
// checks only the length (Fiber's default) shows whether it checks the
// characters. The empty key cannot be new; reusedStatus says how its
// answer is read.
func invalidKeys() []struct{ name, key string } {
	tab, accent := newKey(), newKey()
	return []struct{ name, key string }{
		{"empty", ""},
		{"256 characters", randomHex(128)},
		{"a tab inside", tab[:8] + "\t" + tab[9:]},
		{"non-ASCII", accent[:35] + "é"},
	}
}

// reusedStatus reports whether status is how endpoints answer a key used
// before with another request (422 by the draft, 409 or 417 elsewhere):
// for the empty key, which every run sends, such an answer may mean the
// endpoint stored it on an earlier run, not that it refuses it.
func reusedStatus(status int) bool {
	return status == http.StatusUnprocessableEntity || status == http.StatusConflict || status == http.StatusExpectationFailed
}

func runKeyInvalid(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, KeyInvalid)
	j := js[KeyInvalid]
	op, ok := r.operation(ctx, js)
	if !ok {
		return results(js)
	}
	before, ok := r.count(ctx, op, "effects before", js)
	if !ok {
		return results(js)
	}
	var accepted, failed, refused []string
	for _, k := range invalidKeys() {
		a := r.do(ctx, call{note: "key: " + k.name, url: op.url, body: op.body, key: k.key})
		j.show(a)
		switch {
		case a.err != nil:
			j.error("the %s key got no answer: %v", k.name, a.err)
		case a.status < 400:
			accepted = append(accepted, fmt.Sprintf("%s (%s)", k.name, a.describe()))
		case a.is5xx():
			failed = append(failed, fmt.Sprintf("%s (%s)", k.name, a.describe()))
		case k.key == "" && reusedStatus(a.status):
			j.advise("the empty key was answered %s, as a key used before with another request is: an earlier run may have stored it, so this is no sign that empty keys are refused; refuse them as malformed (400)", a.describe())
		default:
			refused = append(refused, fmt.Sprintf("%s %d", k.name, a.status))
		}
	}
	after, ok := r.count(ctx, op, "effects after", js)
	if !ok {
		return results(js)
	}
	if len(accepted) > 0 {
		j.advise("invalid keys were accepted: %s", strings.Join(accepted, ", "))
	}
	if len(failed) > 0 {
		j.advise("invalid keys were answered 5xx, not as the client's error: %s", strings.Join(failed, ", "))
	}
	if after > before {
		j.advise("requests under invalid keys changed something: %s counted", plural(after-before, "new effect"))
	}
	j.note("every invalid key was refused: %s", strings.Join(refused, ", "))
	return results(js)
}

// replayCost: the first request, and its repeat unless only FirstRequest
// is selected.
func replayCost(cfg *Config, sel map[string]bool) cost {
	c := fixedCost(2, 1, 1, true)(cfg, sel)
	if !sel[ReplayEffect] && !sel[ReplaySame] && !sel[ReplayMarked] {
		c.writes = 1
	}
	return c
}

func runReplay(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, FirstRequest, ReplayEffect, ReplaySame, ReplayMarked)
	op, ok := r.operation(ctx, js)
	if !ok {
		return results(js)
	}
	before, ok := r.count(ctx, op, "effects before", js)
	if !ok {
		return results(js)
	}
	first, ok := r.first(ctx, op, js)
	if !ok {
		return results(js)
	}
	if j := js[FirstRequest]; j != nil {
		j.show(first)
		j.note("answered %s", first.describe())
	}
	if !sel[ReplayEffect] && !sel[ReplaySame] && !sel[ReplayMarked] {
		return results(js)
	}
	replay := r.do(ctx, call{note: "the same request again", url: op.url, body: op.body, key: op.key})
	after, ok := r.count(ctx, op, "effects after", js)
	if !ok {
		return results(js)
	}
	if replay.err != nil {
		all(js, func(j *judge) {
			if j.check.ID != FirstRequest {
				j.error("the repeat got no answer: %v", replay.err)
				j.show(replay)
			}
		})
		return results(js)
	}
	if j := js[ReplayEffect]; j != nil {
		judgeReplayEffect(j, op, first, replay, after-before)
	}
	if j := js[ReplaySame]; j != nil {
		judgeReplaySame(j, first, replay)
	}
	if j := js[ReplayMarked]; j != nil {
		judgeReplayMarked(j, first, replay)
	}
	return results(js)
}

// judgeReplayEffect judges ReplayEffect: the repeat executed nothing, and
// the effects URL, when given, counted one effect for the key.
func judgeReplayEffect(j *judge, op *operation, first, replay *answer, delta int) {
	j.show(first, replay)
	judgeRepeat(j, first, replay, "the repeat")
	if op.effectsURL != "" {
		switch {
		case delta == 0 && first.ok():
			j.error("the effects URL counted no effect of the first request; check the effects URL and pointer")
		case delta > 1:
			j.fail("%d effects were counted for one key", delta)
		default:
			j.note("%d effect counted", delta)
		}
	}
}

// judgeReplaySame judges ReplaySame: the repeat got the first answer's
// status, body and headers.
func judgeReplaySame(j *judge, first, replay *answer) {
	j.show(first, replay)
	var diffs []string
	if replay.status != first.status {
		diffs = append(diffs, fmt.Sprintf("status %d, first %d", replay.status, first.status))
	}
	if !bytes.Equal(replay.body, first.body) {
		diffs = append(diffs, "the body differs "+bodyDiff(first.body, replay.body))
	}
	for _, h := range []string{"Content-Type", "Location", "Content-Location"} {
		if v := first.header.Get(h); v != "" && replay.header.Get(h) != v {
			diffs = append(diffs, fmt.Sprintf("%s %q, first %q", h, replay.header.Get(h), v))
		}
	}
	// A validator describes the resource as it is now, which may have
	// changed since the first answer: a replay may leave it out, but
	// must not name another version.
	for _, h := range []string{"ETag", "Last-Modified"} {
		if v, w := first.header.Get(h), replay.header.Get(h); v != "" && w != "" && w != v {
			diffs = append(diffs, fmt.Sprintf("%s %q, first %q", h, w, v))
		}
	}
	if len(diffs) > 0 {
		j.advise("the repeat is not the stored answer: %s", strings.Join(diffs, "; "))
	}
	j.note("the same status, body and headers (%s)", replay.describe())
}

// judgeReplayMarked judges ReplayMarked: only the repeat carries
// Idempotent-Replayed: true.
func judgeReplayMarked(j *judge, first, replay *answer) {
	j.show(first, replay)
	if first.replayed() {
		j.advise("the first answer is marked as a replay")
	}
	if !replay.replayed() {
		j.advise("the repeat is not marked as a replay (no Idempotent-Replayed: true), so a client cannot tell it from a new result")
	}
	j.note("only the repeat is marked Idempotent-Replayed: true")
}

// judgeRepeat holds a repeat of a finished request (same key, same
// request) to the rule that it does not execute again.
func judgeRepeat(j *judge, first, repeat *answer, what string) {
	switch {
	case repeat.ok():
		same, known := sameResource(first, repeat)
		switch {
		case known && !same:
			j.fail("%s executed again: it names %s, the first request %s", what, repeat.resource(), first.resource())
		case !known:
			j.advise("%s was answered %s; the answers name no resource (no id, no Location) and their bodies differ, so whether it executed again cannot be told without an effects URL", what, repeat.describe())
		default:
			j.note("%s names the same resource (%s)", what, repeat.describe())
		}
	case repeat.err != nil:
		j.error("%s got no answer: %v", what, repeat.err)
	default:
		j.note("%s was answered %s: nothing executed again", what, repeat.describe())
	}
}

// reuseCost: the first request, then for each variant the variant and the
// original again, with an effects read after each variant (and one before);
// another path or method may also need a probe without the key.
func reuseCost(cfg *Config, sel map[string]bool) cost {
	variants, probes := 0, 0
	for _, id := range []string{ReuseBody, ReuseLoose, ReusePath, ReuseMethod} {
		if ok, _ := applicable(cfg, id); ok && sel[id] {
			switch id {
			case ReuseLoose:
				variants += len(looseVariants([]byte(placeholder.ReplaceAllString(string(cfg.Body), "x"))))
			case ReusePath, ReuseMethod:
				variants++
				probes++
			default:
				variants++
			}
		}
	}
	c := cost{writes: 1 + 2*variants + probes, ops: 1, effects: 1}
	if cfg.EffectsURL != "" {
		c.reads = 1 + variants
	}
	return c
}

func runReuse(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := map[string]*judge{}
	for _, id := range []string{ReuseBody, ReuseLoose, ReusePath, ReuseMethod} {
		if ok, _ := applicable(r.cfg, id); ok && sel[id] {
			js[id] = newJudge(id)
		}
	}
	op, first, ok := r.started(ctx, js)
	if !ok {
		return results(js)
	}
	before, ok := r.count(ctx, op, "effects after the first request", js)
	if !ok {
		return results(js)
	}
	for _, v := range reuseVariants(op, r.cfg.MethodVariant) {
		j := js[v.id]
		if j == nil {
			continue
		}
		va := r.do(ctx, v.c)
		after, ok := r.count(ctx, op, "effects after the variant", map[string]*judge{v.id: j})
		if !ok {
			continue
		}
		delta := after - before
		before = after
		again := r.do(ctx, call{note: "the original request again", url: op.url, body: op.body, key: op.key})
		j.show(first, va, again)
		if va.err != nil {
			j.error("the request with %s got no answer: %v", v.what, va.err)
			continue
		}
		switch v.id {
		case ReuseBody:
			judgeReuseBody(j, first, va, delta)
		case ReuseLoose:
			judgeReuseLoose(j, first, va, v.what, delta)
		default:
			judgeReuseScope(j, first, va, v.what, delta)
		}
		if (v.id == ReusePath || v.id == ReuseMethod) && va.refused() {
			// A 404 or 405 from a route that does not exist is no refusal
			// of the key: the same request without a key tells whether the
			// route is there.
			r.probeRoute(ctx, j, v, va)
		}
		r.judgeOriginalKept(j, first, again, v.what)
	}
	return results(js)
}

// reuseVariant is a request under the original's key that differs from it
// in one way, and the check that judges it.
type reuseVariant struct {
	id   string
	what string
	fix  string
	c    call
}

// reuseVariants returns the variants runReuse sends, in order: another
// body, each loosely equal body, another path and another method.
func reuseVariants(op *operation, methodVariant string) []reuseVariant {
	variants := []reuseVariant{{ReuseBody, "another body", "", call{note: "same key, another body", url: op.url, body: op.variant, key: op.key}}}
	for _, lv := range looseVariants(op.body) {
		variants = append(variants, reuseVariant{ReuseLoose, "the body with " + lv.what, "", call{note: "same key, " + lv.what, url: op.url, body: lv.body, key: op.key}})
	}
	return append(variants, []reuseVariant{
		{ReusePath, "another path", "give -url-variant a route of the API that takes this body", call{note: "same key, another path", url: op.urlVariant, body: op.body, key: op.key}},
		{ReuseMethod, "another method", "give -method-variant a method this URL serves, or leave it out", call{note: "same key, another method", method: methodVariant, url: op.url, body: op.body, key: op.key}},
	}...)
}

// probeRoute sends a refused variant again without a key and judges
// whether a route serves it at all.
func (r *runner) probeRoute(ctx context.Context, j *judge, v reuseVariant, va *answer) {
	probe := v.c
	probe.note, probe.noKey = "the same without a key: is the route there?", true
	pa := r.do(ctx, probe)
	j.show(pa)
	switch {
	case pa.err != nil:
		j.error("the request with %s and no key got no answer: %v", v.what, pa.err)
	case pa.status == http.StatusNotFound || pa.status == http.StatusMethodNotAllowed || pa.status == http.StatusNotImplemented:
		j.notJudged("no route serves the request with %s: without a key too it was answered %s, so the %d under the used key says nothing of the key; %s",
			v.what, pa.describe(), va.status, v.fix)
	default:
		j.note("the route exists (without a key: %s)", pa.describe())
	}
}

// judgeOriginalKept judges the original request, sent again after a
// variant: whatever the variant got, it must not have replaced the
// original's record, which would answer the original twice.
func (r *runner) judgeOriginalKept(j *judge, first, again *answer, what string) {
	switch same, known := sameResource(first, again); {
	case again.err != nil:
		j.error("the original request, sent again, got no answer: %v", again.err)
	case !r.final(again) || again.status != first.status:
		j.fail("the original request, sent again, is now answered %s: the request with %s replaced the key's record", again.describe(), what)
	case known && !same:
		j.fail("the original request, sent again, now names %s instead of %s: the request with %s replaced the key's record", again.resource(), first.resource(), what)
	default:
		j.note("the original request still gets its own answer")
	}
}

func judgeReuseBody(j *judge, first, va *answer, delta int) {
	switch {
	case va.status < 400:
		how := "executed as a new operation"
		if same, known := sameResource(first, va); known && same {
			how = "given the original's answer, so the endpoint compares no fingerprint"
		}
		j.fail("another body under a used key was answered %s, not refused: %s", va.describe(), how)
	case va.status == http.StatusUnprocessableEntity:
		j.note("another body was refused with %s", va.describe())
	case va.is5xx():
		j.advise("another body was answered %s; §2.7 says 422", va.describe())
	default:
		j.advise("another body was refused with %s; §2.7 says 422", va.describe())
	}
	if delta > 0 {
		j.fail("the refused request changed something: %s counted", plural(delta, "new effect"))
	}
}

// judgeReuseLoose holds a body loosely equal to the original's, under the
// original's key, to the rule that it is another request.
func judgeReuseLoose(j *judge, first, va *answer, what string, delta int) {
	same, known := sameResource(first, va)
	switch {
	case va.err == nil && va.status == first.status && (known && same || va.replayed()):
		j.fail("%s got the original's answer (%s): the endpoint compares bodies loosely, so it takes another request for the original", what, va.describe())
	case va.status < 400:
		j.fail("%s, under a used key, was answered %s: executed as a new operation", what, va.describe())
	case va.status == http.StatusUnprocessableEntity:
		j.note("%s was refused with %s", what, va.describe())
	case va.status == http.StatusBadRequest:
		j.note("%s was refused as invalid (%s), for its own mistake", what, va.describe())
	default:
		j.advise("%s was answered %s; §2.7 says 422", what, va.describe())
	}
	if delta > 0 {
		j.fail("%s changed something: %s counted", what, plural(delta, "new effect"))
	}
}

func judgeReuseScope(j *judge, first, va *answer, what string, delta int) {
	switch {
	case va.ok():
		if same, known := sameResource(first, va); known && same {
			j.advise("%s under a used key was answered %s, the original's result: the fingerprint does not cover it, and this project refuses it with 422", what, va.describe())
		} else {
			j.advise("%s under a used key was executed as a new operation (%s): keys are scoped per path or method here, and this project refuses it with 422", what, va.describe())
		}
	case va.status == http.StatusUnprocessableEntity:
		j.note("%s was refused with %s", what, va.describe())
	case va.refused():
		j.note("%s was refused with %s (this project answers 422)", what, va.describe())
	default:
		j.advise("%s under a used key was answered %s", what, va.describe())
	}
	if delta > 0 && !va.ok() {
		j.advise("the refused request changed something: %s counted", plural(delta, "new effect"))
	}
}

func runCanonical(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, FingerprintCanonical)
	j := js[FingerprintCanonical]
	op, ok := r.operation(ctx, js)
	if !ok {
		return results(js)
	}
	reordered, ok := reorder(op.body)
	spacedOut, ok2 := spaced(op.body)
	if !ok || !ok2 {
		j.notApplicable("the body is not a JSON object with two members or more")
		return results(js)
	}
	first, ok := r.first(ctx, op, js)
	if !ok {
		return results(js)
	}
	// One change a request, so that a reason names the one that mattered:
	// an endpoint may ignore whitespace and still care for member order.
	type variant struct {
		with, change string
		a            *answer
	}
	variants := []variant{
		{"whitespace added", "added whitespace", r.do(ctx, call{note: "whitespace added, members in their order", url: op.url, body: spacedOut, key: op.key})},
		{"members reversed", "member order", r.do(ctx, call{note: "members reversed, no whitespace added", url: op.url, body: reordered, key: op.key})},
	}
	j.show(first, variants[0].a, variants[1].a)
	var replayed, refused []variant
	for _, v := range variants {
		a := v.a
		switch {
		case a.err != nil:
			j.error("the request with %s got no answer: %v", v.with, a.err)
		case r.final(a) && a.status == first.status:
			same, known := sameResource(first, a)
			switch {
			case known && !same:
				j.fail("the request with %s executed again under the same key: it names %s, the first %s (the rule of %s)", v.with, a.resource(), first.resource(), ReplayEffect)
			case !known:
				j.advise("the request with %s was answered %s; whether it executed again cannot be told (no id, no Location)", v.with, a.describe())
			default:
				replayed = append(replayed, v)
			}
		case a.status == http.StatusUnprocessableEntity:
			refused = append(refused, v)
		default:
			j.advise("the request with %s was answered %s, not the replay", v.with, a.describe())
		}
	}
	switch {
	case len(refused) == 2:
		j.advise("added whitespace and member order each change the request for the endpoint (both refused with %s): its fingerprint is over the bytes", refused[0].a.describe())
	case len(refused) == 1 && len(replayed) == 1:
		j.advise("%s changes the request for the endpoint (refused with %s); %s does not (replayed)", refused[0].change, refused[0].a.describe(), replayed[0].change)
	case len(refused) == 1:
		j.advise("%s changes the request for the endpoint (refused with %s)", refused[0].change, refused[0].a.describe())
	}
	if len(replayed) == 2 {
		j.note("replayed with whitespace added (%s) and with members reversed (%s)", replayed[0].a.describe(), replayed[1].a.describe())
	}
	return results(js)
}

// copiesCost is a scenario that sends the Config's Concurrency copies at
// once after writes other requests, with an effects read before and after
// the copies, and in which a correct endpoint makes effects.
func copiesCost(writes, effects int) func(*Config, map[string]bool) cost {
	return func(cfg *Config, _ map[string]bool) cost {
		c := cost{writes: writes + cfg.Concurrency, ops: 1, effects: effects}
		if cfg.EffectsURL != "" {
			c.reads = 2
		}
		return c
	}
}

func runConcurrent(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, Concurrent)
	j := js[Concurrent]
	op, ok := r.operation(ctx, js)
	if !ok {
		return results(js)
	}
	before, ok := r.count(ctx, op, "effects before", js)
	if !ok {
		return results(js)
	}
	n := r.cfg.Concurrency
	answers := r.copies(ctx, op, n, "copy")
	after, ok := r.count(ctx, op, "effects after", js)
	if !ok {
		return results(js)
	}
	// The tally is what was seen, whatever the verdict: a reader of a
	// failure or of advice needs it most.
	fact := fmt.Sprintf("%d copies at once: %s", n, tallyAnswers(answers))
	if op.effectsURL != "" {
		fact += fmt.Sprintf("; %s counted", plural(after-before, "new effect"))
	}
	j.fact("%s", fact)
	showKinds(j, answers)

	var oks, noRetryAfter []*answer
	var others []string
	errs := 0
	for _, a := range answers {
		switch {
		case a.err != nil:
			errs++
		case r.final(a):
			oks = append(oks, a)
		case a.status == http.StatusConflict:
			if a.header.Get("Retry-After") == "" {
				noRetryAfter = append(noRetryAfter, a)
			}
		default:
			others = append(others, a.describe())
		}
	}
	if errs == n {
		j.error("no copy got an answer: %v", answers[0].err)
		return results(js)
	}
	if made := resources(oks); len(made) > 1 {
		j.fail("%d copies made %d different resources: %s", n, len(made), listed(made))
	}
	if op.effectsURL != "" {
		switch delta := after - before; {
		case delta > 1:
			j.fail("%d new effects were counted for one key", delta)
		case delta == 0 && len(oks) > 0 && oks[0].ok():
			j.error("the effects URL counted no new effect though %d copies were answered 2xx; check the effects URL and pointer", len(oks))
		}
	}
	if len(oks) == 0 {
		j.advise("no copy got a 2xx answer")
	}
	if len(noRetryAfter) > 0 {
		j.advise("%d of the 409 answers carry no Retry-After, so clients must guess when to try again", len(noRetryAfter))
	}
	if len(others) > 0 {
		j.advise("%d copies were answered neither 2xx nor 409 (§2.7: a concurrent retry gets 409): %s", len(others), strings.Join(uniq(others), ", "))
	}
	if errs > 0 {
		j.advise("%d copies got no answer (timeout or connection error)", errs)
	}
	if len(oks) > 0 && oks[0].resource() != "" {
		j.note("every 2xx names %s", oks[0].resource())
	}
	return results(js)
}

// copies sends n copies of op's request at once, under its key.
func (r *runner) copies(ctx context.Context, op *operation, n int, note string) []*answer {
	answers := make([]*answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = r.do(ctx, call{note: fmt.Sprintf("%s %d of %d", note, i+1, n), url: op.url, body: op.body, key: op.key})
		}()
	}
	close(start) // every copy at once
	wg.Wait()
	return answers
}

// showKinds shows one answer of each kind as evidence: enough to see
// what the copies got without thirty times the same.
func showKinds(j *judge, answers []*answer) {
	shown := map[string]bool{}
	for _, a := range answers {
		kind := fmt.Sprint(a.status, a.replayed(), a.identity())
		if !shown[kind] && len(shown) < 6 {
			shown[kind] = true
			j.show(a)
		}
	}
}

// resources returns the distinct resources that answers name, by the
// identity sameResource compares (the JSON id before the Location), in
// the order first seen.
func resources(answers []*answer) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range answers {
		if id := a.identity(); id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// plural is "1 new effect", "2 new effects".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// listed joins names for a reason, the first few of them.
func listed(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// tallyAnswers counts answers by status: "201 × 1, 201 replayed × 29".
func tallyAnswers(answers []*answer) string {
	counts := map[string]int{}
	for _, a := range answers {
		k := "no answer"
		if a.err == nil {
			k = fmt.Sprint(a.status)
			if a.replayed() {
				k += " replayed"
			}
		}
		counts[k]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s × %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func runCredentials(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, Credentials)
	j := js[Credentials]
	op, first, ok := r.started(ctx, js)
	if !ok {
		return results(js)
	}
	other := r.do(ctx, call{note: "same key and request, other credentials", url: op.url, body: op.body, key: op.key, second: true})
	again := r.do(ctx, call{note: "the first client's request again", url: op.url, body: op.body, key: op.key})
	j.show(first, other, again)
	if other.err != nil {
		j.error("the request under the other credentials got no answer: %v", other.err)
		return results(js)
	}
	same, known := sameResource(first, other)
	switch {
	case other.status == http.StatusUnauthorized || other.status == http.StatusForbidden:
		j.error("the other credentials (-H2) were refused with %s, so the endpoint was never asked as another client: give -H2 credentials of another client that it accepts", other.describe())
	case r.final(other) && (known && same || other.replayed()):
		j.fail("the other credentials got the first client's answer (%s): keys are not scoped to the client", other.describe())
	case other.ok():
		j.note("the other credentials made a separate operation (%s)", other.describe())
	case other.replayed():
		j.fail("the other credentials got a replayed answer (%s)", other.describe())
	default:
		j.note("the other credentials were answered %s, not with the first client's answer", other.describe())
	}
	switch same, known := sameResource(first, again); {
	case again.err != nil:
		j.error("the first client's repeat got no answer: %v", again.err)
	case !r.final(again) || again.status != first.status:
		j.fail("the first client's repeat is now answered %s: the other client's request replaced its record", again.describe())
	case known && !same:
		j.fail("the first client's repeat now names %s instead of %s: the other client's request replaced its record", again.resource(), first.resource())
	default:
		j.note("the first client's repeat still gets its own answer")
	}
	return results(js)
}

func runPause(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, PauseReplay)
	j := js[PauseReplay]
	op, first, ok := r.started(ctx, js)
	if !ok {
		return results(js)
	}
	select {
	case <-ctx.Done():
		j.error("canceled during the pause: %v", ctx.Err())
		return results(js)
	case <-time.After(r.cfg.Pause):
	}
	replay := r.do(ctx, call{note: fmt.Sprintf("the same request after %s", r.cfg.Pause), url: op.url, body: op.body, key: op.key})
	j.show(first, replay)
	judgeRepeat(j, first, replay, fmt.Sprintf("the repeat after %s", r.cfg.Pause))
	if replay.err == nil && (!r.final(replay) || replay.status != first.status) {
		j.advise("after %s the repeat was answered %s, not the stored answer", r.cfg.Pause, replay.describe())
	}
	return results(js)
}

// runExpiry lets a key expire, then sends copies of its request at once:
// an endpoint that drops the expired record and runs the request without
// taking the key first runs it once per copy that saw the record.
func runExpiry(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, ExpiryRace)
	j := js[ExpiryRace]
	op, first, ok := r.started(ctx, js)
	if !ok {
		return results(js)
	}
	j.show(first)
	wait := r.cfg.TTL + grace(r.cfg.TTL)
	select {
	case <-ctx.Done():
		j.error("canceled while the key expired: %v", ctx.Err())
		return results(js)
	case <-time.After(wait):
	}
	before, ok := r.count(ctx, op, "effects before the copies", js)
	if !ok {
		return results(js)
	}
	n := r.cfg.Concurrency
	answers := r.copies(ctx, op, n, "copy after expiry")
	after, ok := r.count(ctx, op, "effects after the copies", js)
	if !ok {
		return results(js)
	}
	fact := fmt.Sprintf("%d copies at once, %s after the first answer: %s", n, wait.Round(10*time.Millisecond), tallyAnswers(answers))
	if op.effectsURL != "" {
		fact += fmt.Sprintf("; %s counted", plural(after-before, "new effect"))
	}
	j.fact("%s", fact)
	showKinds(j, answers)

	var fresh, old []*answer // final answers naming another resource than the first, and the first
	unknown, errs := 0, 0
	for _, a := range answers {
		switch same, known := sameResource(first, a); {
		case a.err != nil:
			errs++
		case !r.final(a):
		case !known:
			unknown++
		case same:
			old = append(old, a)
		default:
			fresh = append(fresh, a)
		}
	}
	if errs == n {
		j.error("no copy got an answer: %v", answers[0].err)
		return results(js)
	}
	delta := after - before
	made := resources(fresh)
	switch {
	case len(made) > 1:
		j.fail("the copies made %d new resources after the key expired: %s", len(made), listed(made))
	case op.effectsURL != "" && delta > 1:
		j.fail("%s were counted after the key expired", plural(delta, "new effect"))
	case unknown > 0 && op.effectsURL == "":
		j.notJudged("the answers name no resource (no id, no Location) and no -effects-url counts them, so how many copies executed cannot be told")
	case len(fresh) == 0 && len(old) > 0 && (op.effectsURL == "" || delta == 0):
		j.notJudged("the key had not expired %s after its first answer: copies got the original's answer; give -ttl the time the endpoint keeps a key", wait.Round(10*time.Millisecond))
	case len(fresh) == 0 && delta == 0:
		j.note("no copy executed a new operation")
	default:
		j.note("one copy executed as a new operation")
	}
	if errs > 0 {
		j.advise("%d copies got no answer (timeout or connection error)", errs)
	}
	return results(js)
}

// timingReplays is how many replays Timing measures.
const timingReplays = 5

func runTiming(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := judges(sel, Timing)
	j := js[Timing]
	op, first, ok := r.started(ctx, js)
	if !ok {
		return results(js)
	}
	j.show(first)
	var times []time.Duration
	for i := range timingReplays {
		a := r.do(ctx, call{note: fmt.Sprintf("replay %d", i+1), url: op.url, body: op.body, key: op.key})
		if a.err == nil {
			times = append(times, a.elapsed)
		}
		if i == 0 {
			j.show(a)
		}
	}
	if len(times) == 0 {
		j.error("no replay got an answer")
		return results(js)
	}
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	j.note("first request %s; %d replays: median %s (fastest %s, slowest %s)", ms(first.elapsed), len(times),
		ms(times[len(times)/2]), ms(times[0]), ms(times[len(times)-1]))
	return results(js)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

package idemcheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// ErrPreflight wraps the error Run returns when its first request shows
// that no check could be judged: the endpoint did not answer, refused the
// request every check is built on, or the effects URL did not count its
// effect. The error says what to fix; no check ran.
var ErrPreflight = errors.New("stopped after the first request")

// preflightCost is what the first request costs: one operation, and the
// effects read before and after it.
func preflightCost(cfg *Config) cost {
	c := cost{writes: 1, ops: 1, effects: 1}
	if cfg.EffectsURL != "" {
		c.reads = 2
	}
	return c
}

// final reports whether a is an answer that finishes an operation: a 2xx,
// or a status the Config declares as the endpoint's own stored outcome.
func (r *runner) final(a *answer) bool {
	return a.ok() || a.err == nil && slices.Contains(r.cfg.FinalStatus, a.status)
}

// preflight sends the request every check is built on, once, under a new
// key, and says what to fix when its answer cannot carry a verdict. A check
// that went on from there would judge the endpoint by answers to a request
// it refuses (a wrong URL, credentials or body make every invalid key look
// refused), or repeat one transport error in every line of the report.
func (r *runner) preflight(ctx context.Context) error {
	op, err := r.newOperation(ctx)
	if err != nil {
		return err
	}
	before := 0
	if op.effectsURL != "" {
		var ea *answer
		if before, ea, err = r.effects(ctx, op, "effects before the first request"); err != nil {
			return fmt.Errorf("%w: %s", err, effectsFix(ea))
		}
	}
	a := r.do(ctx, call{note: "the first request", url: op.url, body: op.body, key: op.key})
	what := fmt.Sprintf("%s %s (a new key, the -body)", a.ex.Method, a.ex.URL)
	if len(op.body) == 0 {
		what = fmt.Sprintf("%s %s (a new key, no body)", a.ex.Method, a.ex.URL)
	}
	if fix := r.preflightFix(a, len(op.body) > 0); fix != "" {
		answered := "was answered " + a.describe()
		if a.err != nil {
			answered = "got no answer: " + a.err.Error()
		} else if a.ex.Body != "" {
			answered += " (" + trimTo(a.ex.Body, 200) + ")"
		}
		return fmt.Errorf("%s %s: %s", what, answered, fix)
	}
	if op.effectsURL == "" {
		return nil
	}
	after, ea, err := r.effects(ctx, op, "effects after the first request")
	if err != nil {
		return fmt.Errorf("%w: %s", err, effectsFix(ea))
	}
	if a.ok() && after == before {
		return fmt.Errorf("%s was answered %s, but the effects URL counted no new effect (%d before and after): check that -effects-url and -effects-pointer count what this request creates (with the same {{unique}} value)",
			what, a.describe(), after)
	}
	return nil
}

// preflightFix says what to fix when a, the first request's answer, cannot
// carry a verdict; "" when it can.
func (r *runner) preflightFix(a *answer, hasBody bool) string {
	if a.err != nil {
		return "is the endpoint running at that address? No check was run"
	}
	if r.final(a) {
		return ""
	}
	switch st := a.status; {
	case st >= 300 && st < 400:
		return "the checker follows no redirect; give -url the address the redirect names"
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return "the credentials were refused; check -H"
	case st == http.StatusNotFound:
		return "nothing answers this URL; check -url (its path, and any {{placeholder}})"
	case st == http.StatusMethodNotAllowed || st == http.StatusNotImplemented:
		return "the endpoint does not serve this method; check -X and -url"
	case st == http.StatusBadRequest && !hasBody:
		return "no -body was given, and the endpoint refuses the request without one; give -body (or, if the answer is about the key, -key-header)"
	case st == http.StatusBadRequest || st == http.StatusUnprocessableEntity:
		return "the endpoint refused the request as invalid; give -body a body it accepts, with its Content-Type in -H (or, if the answer is about the key, check -key-header)"
	case st == http.StatusRequestEntityTooLarge:
		return "the -body is over the endpoint's size limit"
	case st == http.StatusUnsupportedMediaType:
		return "the endpoint does not take this Content-Type; set it with -H 'Content-Type: …'"
	case st == http.StatusPaymentRequired || st == http.StatusConflict:
		return fmt.Sprintf("if %d is the endpoint's own final answer to this body (a decline or a conflict it stores), declare it with -final-status %d; otherwise give a request that succeeds ({{unique}} makes each operation new)", st, st)
	case st == http.StatusTooManyRequests:
		return "the endpoint limits the rate of requests; try later, or raise its limit in the test environment"
	case st >= 500:
		return "the endpoint failed; its logs say why. The checks need this request answered 2xx"
	}
	return "the checks need this request answered 2xx"
}

// effectsFix says what to fix when the effects URL did not answer a count.
func effectsFix(a *answer) string {
	switch {
	case a.err != nil:
		return "is it running at that address?"
	case a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
		return "the credentials were refused; check -H (the effects URL is read with them)"
	case a.status == http.StatusNotFound:
		return "nothing answers it; check -effects-url"
	}
	return "check -effects-url and -effects-pointer"
}

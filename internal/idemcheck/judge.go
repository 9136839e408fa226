package idemcheck

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
)

// judge collects what a check found and turns it into a Result.
type judge struct {
	check    Check
	fails    []string
	advice   []string
	errs     []string
	na       string
	nj       string
	notes    []string
	facts    []string
	evidence []*answer
}

func newJudge(id string) *judge {
	c, _ := Lookup(id)
	return &judge{check: c}
}

func (j *judge) fail(format string, args ...any) {
	j.fails = append(j.fails, fmt.Sprintf(format, args...))
}
func (j *judge) advise(format string, args ...any) {
	j.advice = append(j.advice, fmt.Sprintf(format, args...))
}
func (j *judge) error(format string, args ...any) {
	j.errs = append(j.errs, fmt.Sprintf(format, args...))
}
func (j *judge) note(format string, args ...any) {
	j.notes = append(j.notes, fmt.Sprintf(format, args...))
}

// fact records what was seen, shown with any verdict: after the reasons
// of a failure or advice, before the notes of a pass.
func (j *judge) fact(format string, args ...any) {
	j.facts = append(j.facts, fmt.Sprintf(format, args...))
}
func (j *judge) notApplicable(format string, args ...any) {
	j.na = fmt.Sprintf(format, args...)
}
func (j *judge) notJudged(format string, args ...any) {
	j.nj = fmt.Sprintf(format, args...)
}
func (j *judge) show(answers ...*answer) {
	for _, a := range answers {
		if a != nil && !slices.Contains(j.evidence, a) {
			j.evidence = append(j.evidence, a)
		}
	}
}

// result picks the verdict: an error over everything, then not applicable,
// a failure (evidence of one stands even where the rest could not be
// judged), not judged, advice, and a pass.
func (j *judge) result() Result {
	res := Result{Check: j.check}
	var reasons []string
	switch {
	case len(j.errs) > 0:
		res.Verdict, reasons = Error, append(j.errs, j.facts...)
	case j.na != "":
		res.Verdict, reasons = NotApplicable, []string{j.na}
	case len(j.fails) > 0:
		res.Verdict, reasons = Fail, append(append(j.fails, j.advice...), j.facts...)
	case j.nj != "":
		res.Verdict, reasons = NotJudged, append(append([]string{j.nj}, j.advice...), j.facts...)
	case len(j.advice) > 0:
		res.Verdict, reasons = Advice, append(j.advice, j.facts...)
	default:
		res.Verdict, reasons = Pass, append(j.facts, j.notes...)
	}
	res.Reason = sentences(uniq(reasons))
	for _, a := range j.evidence {
		res.Evidence = append(res.Evidence, a.ex)
	}
	return res
}

// sentences joins reasons into sentences.
func sentences(reasons []string) string {
	out := make([]string, 0, len(reasons))
	for _, r := range reasons {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if !strings.HasSuffix(r, ".") {
			r += "."
		}
		out = append(out, strings.ToUpper(r[:1])+r[1:])
	}
	return strings.Join(out, " ")
}

// judges returns a judge for each selected check of ids.
func judges(sel map[string]bool, ids ...string) map[string]*judge {
	js := map[string]*judge{}
	for _, id := range ids {
		if sel[id] {
			js[id] = newJudge(id)
		}
	}
	return js
}

// results returns the judges' results in catalogue order.
func results(js map[string]*judge) []Result {
	var out []Result
	for _, c := range catalogue {
		if j, ok := js[c.ID]; ok {
			out = append(out, j.result())
		}
	}
	return out
}

// all applies f to every judge.
func all(js map[string]*judge, f func(*judge)) {
	for _, j := range js {
		f(j)
	}
}

// sameResource reports whether two answers name the same resource: by
// their JSON ids, else their Locations, else identical bodies. known is
// false when the answers give no way to tell.
func sameResource(a, b *answer) (same, known bool) {
	if ia, ib := jsonID(a.body), jsonID(b.body); ia != "" && ib != "" {
		return ia == ib, true
	}
	if la, lb := a.header.Get("Location"), b.header.Get("Location"); la != "" && lb != "" {
		return la == lb, true
	}
	if len(a.body) > 0 && bytes.Equal(a.body, b.body) {
		return true, true
	}
	return false, false
}

// first sends an operation's first request and says, on every judge,
// why nothing more can be checked when it did not succeed.
func (r *runner) first(ctx context.Context, op *operation, js map[string]*judge) (*answer, bool) {
	a := r.do(ctx, call{note: "first request", url: op.url, body: op.body, key: op.key})
	if !r.final(a) {
		all(js, func(j *judge) {
			j.error("the first request under a new key was answered %s, not 2xx as the first request of the run was; the check needs a request that succeeds", a.describe())
			j.show(a)
		})
		return a, false
	}
	return a, true
}

// started makes a new operation and sends its first request, as most
// checks begin; ok is false, and every judge says why, when either failed.
func (r *runner) started(ctx context.Context, js map[string]*judge) (*operation, *answer, bool) {
	op, ok := r.operation(ctx, js)
	if !ok {
		return nil, nil, false
	}
	first, ok := r.first(ctx, op, js)
	return op, first, ok
}

// operation makes a new operation, or says on every judge why it could not.
func (r *runner) operation(ctx context.Context, js map[string]*judge) (*operation, bool) {
	op, err := r.newOperation(ctx)
	if err != nil {
		all(js, func(j *judge) { j.error("%v", err) })
		return nil, false
	}
	return op, true
}

// count reads the effects count when an effects URL is given; ok is false
// (and every judge says why) when it could not be read.
func (r *runner) count(ctx context.Context, op *operation, note string, js map[string]*judge) (n int, ok bool) {
	if op.effectsURL == "" {
		return 0, true
	}
	n, a, err := r.effects(ctx, op, note)
	if err != nil {
		all(js, func(j *judge) { j.error("%v", err); j.show(a) })
		return 0, false
	}
	return n, true
}

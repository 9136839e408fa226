package idemcheck

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The failures scenario sends what goes wrong and what comes after it, and
// judges four checks on the same answers: the invalid body, then the
// corrected request under its key (NoBurn); the -body-5xx body, the same
// again, then the valid body under its key (No5xxReplay, NoCrashLock); and
// whatever error either part saw replayed (ReplayErrorType).

// lockPolls bounds how often NoCrashLock asks a locked key again before
// its deadline, the last time at the deadline.
const lockPolls = 5

// MaxWait caps how long one check waits for the endpoint: -lock-timeout
// and -ttl above it are refused, so that a run ends in minutes; shorten
// the endpoint's own setting in the test environment instead.
const MaxWait = 5 * time.Minute

// grace is the time past a timeout the endpoint states after which the
// checker holds it to it: its clocks and its store's expiry are not
// exact, and it counts from before the checker saw the answer.
func grace(d time.Duration) time.Duration { return d/10 + 500*time.Millisecond }

func failuresCost(cfg *Config, sel map[string]bool) cost {
	want := func(id string) bool { ok, _ := applicable(cfg, id); return ok && sel[id] }
	var c cost
	if len(cfg.InvalidBody) > 0 && (want(NoBurn) || want(ReplayErrorType)) {
		c.writes, c.ops, c.effects = c.writes+2, c.ops+1, c.effects+1
	}
	if len(cfg.FaultBody) > 0 && (want(No5xxReplay) || want(NoCrashLock) || want(ReplayErrorType)) {
		c.writes, c.ops, c.effects = c.writes+3, c.ops+1, c.effects+1
		if want(NoCrashLock) {
			c.writes += lockPolls
		}
	}
	return c
}

// errorReplay is an error answer and its replay, for ReplayErrorType.
type errorReplay struct{ original, replay *answer }

func runFailures(ctx context.Context, r *runner, sel map[string]bool) []Result {
	js := map[string]*judge{}
	for _, id := range []string{NoBurn, No5xxReplay, NoCrashLock, ReplayErrorType} {
		if ok, _ := applicable(r.cfg, id); ok && sel[id] {
			js[id] = newJudge(id)
		}
	}
	var replays []errorReplay
	if len(r.cfg.InvalidBody) > 0 && (js[NoBurn] != nil || js[ReplayErrorType] != nil) {
		replays = append(replays, r.invalidThenValid(ctx, js)...)
	}
	if len(r.cfg.FaultBody) > 0 && (js[No5xxReplay] != nil || js[NoCrashLock] != nil || js[ReplayErrorType] != nil) {
		replays = append(replays, r.faultThenValid(ctx, js)...)
	}
	if j := js[ReplayErrorType]; j != nil {
		judgeErrorType(j, replays)
	}
	return results(js)
}

// isReplayOf reports whether a is the answer original stored, sent back:
// marked as a replay, or the same status and body byte for byte (an error
// whose body names no resource cannot be told apart otherwise; a request
// other than the original's that gets it is a replay for certain).
func isReplayOf(a, original *answer) bool {
	return a.err == nil && a.status == original.status && (a.replayed() || bytes.Equal(a.body, original.body))
}

// invalidThenValid sends the invalid body, then the valid one under the
// same key, and judges NoBurn.
func (r *runner) invalidThenValid(ctx context.Context, all map[string]*judge) []errorReplay {
	js := only(all, NoBurn, ReplayErrorType)
	j := all[NoBurn]
	if j == nil {
		j = newJudge(NoBurn) // not reported: its requests serve ReplayErrorType
	}
	op, ok := r.operation(ctx, js)
	if !ok {
		return nil
	}
	bad := r.do(ctx, call{note: "the invalid body", url: op.url, body: op.invalid, key: op.key})
	j.show(bad)
	switch {
	case bad.err != nil:
		errorAll(js, "the invalid body got no answer: %v", bad.err)
		return nil
	case !bad.refused():
		j.notJudged("the invalid body was answered %s, not refused with 4xx: give -body-invalid a body the endpoint refuses", bad.describe())
		return nil
	}
	good := r.do(ctx, call{note: "the corrected request, same key", url: op.url, body: op.body, key: op.key})
	j.show(good)
	switch {
	case good.err != nil:
		errorAll(js, "the corrected request got no answer: %v", good.err)
	case r.final(good):
		j.note("%d, then %s under the same key", bad.status, good.describe())
	case isReplayOf(good, bad):
		j.advise("the refusal was stored and replayed (%s again): the corrected request cannot use the key", good.describe())
		return []errorReplay{{bad, good}}
	case good.status == http.StatusUnprocessableEntity:
		j.advise("the corrected request was refused as a reuse (%s): the refusal used up the key", good.describe())
	default:
		j.advise("the corrected request was answered %s, not 2xx", good.describe())
	}
	return nil
}

// faultThenValid sends the -body-5xx body, the same again, and the valid
// body under the same key; when the key answers 409 it asks again until
// the lock timeout has passed. It judges No5xxReplay and NoCrashLock.
func (r *runner) faultThenValid(ctx context.Context, all map[string]*judge) []errorReplay {
	js := only(all, No5xxReplay, NoCrashLock, ReplayErrorType)
	stored, lock := all[No5xxReplay], all[NoCrashLock]
	if stored == nil {
		stored = newJudge(No5xxReplay) // not reported: its requests serve the others
	}
	if lock == nil {
		lock = newJudge(NoCrashLock)
	}
	op, ok := r.operation(ctx, js)
	if !ok {
		return nil
	}
	f1 := r.do(ctx, call{note: "the request that fails", url: op.url, body: op.fault, key: op.key})
	failedAt := time.Now()
	both(stored, lock, func(j *judge) { j.show(f1) })
	switch {
	case f1.err != nil:
		errorAll(js, "the -body-5xx request got no answer: %v", f1.err)
		return nil
	case !f1.is5xx():
		both(stored, lock, func(j *judge) {
			j.notJudged("the -body-5xx request was answered %s, not 5xx: give -body-5xx a body the endpoint fails on", f1.describe())
		})
		return nil
	}
	f2 := r.do(ctx, call{note: "the same request again", url: op.url, body: op.fault, key: op.key})
	v := r.do(ctx, call{note: "the valid body, same key", url: op.url, body: op.body, key: op.key})
	both(stored, lock, func(j *judge) { j.show(f2, v) })
	for _, a := range []*answer{f2, v} {
		if a.err != nil {
			errorAll(js, "a request after the %d got no answer: %v", f1.status, a.err)
			return nil
		}
	}
	same, valid := r.afterLock(ctx, op, lock, all[NoCrashLock] != nil, f1, f2, v, failedAt)
	return r.judgeFaultStored(stored, f1, v, same, valid)
}

// afterLock returns same and valid, the answers, after the lock if there
// was one, to the failing request again and to the valid body; nil while
// locked. When the key answered 409 and NoCrashLock is selected, it waits
// for the lock and judges NoCrashLock.
func (r *runner) afterLock(ctx context.Context, op *operation, lock *judge, waitLock bool, f1, f2, v *answer, failedAt time.Time) (same, valid *answer) {
	same, valid = f2, v
	if f2.status == http.StatusConflict || v.status == http.StatusConflict {
		if f2.status == http.StatusConflict {
			same = nil
		}
		if v.status == http.StatusConflict {
			valid = nil
		}
		if waitLock {
			freed, probedValid := r.waitForLock(ctx, op, f2, v, failedAt, lock)
			switch {
			case freed != nil && probedValid:
				valid = freed
			case freed != nil:
				same = freed
			}
			judgeLock(lock, r.cfg.LockTimeout, f1, f2, v, freed, failedAt)
		}
	} else {
		lock.note("the key was not locked after the %d: the same request was answered %s, the valid body %s", f1.status, f2.describe(), v.describe())
	}
	return same, valid
}

// judgeFaultStored judges No5xxReplay on the answers after the failure f1
// (v as first sent, same and valid after any lock) and returns the error
// replays it saw.
func (r *runner) judgeFaultStored(stored *judge, f1, v, same, valid *answer) []errorReplay {
	var replays []errorReplay
	switch {
	case same != nil && same.replayed():
		stored.advise("the %d was stored and replayed (%s): the key cannot be retried", f1.status, same.describe())
		replays = append(replays, errorReplay{f1, same})
	case same != nil && !isReplayOf(same, f1):
		stored.note("%s, then %s: the %d was not replayed", f1.describe(), same.describe(), f1.status)
	// The same request got the same bytes again, or is still locked: the
	// stored answer, or the same failure anew? The valid body under the
	// key tells.
	case valid != nil && r.final(valid):
		stored.note("after the %d, the valid body under the key executed (%s): the %d was not stored", f1.status, valid.describe(), f1.status)
	case valid != nil && isReplayOf(valid, f1):
		stored.advise("the %d is stored: the valid body under the key got it back byte for byte (%s)", f1.status, valid.describe())
		replays = append(replays, errorReplay{f1, valid})
	case same == nil:
		stored.notJudged("the key stayed locked after the %d (409), so whether the %d is stored cannot be told; see %s", f1.status, f1.status, NoCrashLock)
	case valid != nil && valid.status == http.StatusUnprocessableEntity:
		stored.notJudged("the same %d came back byte for byte, and the valid body under the key is refused as another request (%s): the key holds the failed request, but whether it stored the %d or ran it again and failed the same way cannot be told; a -body-5xx that fails once, then succeeds, tells",
			f1.status, valid.describe(), f1.status)
	default:
		stored.notJudged("the same %d came back byte for byte, and the valid body under the key was answered %s: whether the %d is stored cannot be told", f1.status, v.describe(), f1.status)
	}
	return replays
}

// waitForLock asks the locked key again, following Retry-After, until it
// answers something else or the lock timeout (and its grace) has passed
// since the failure. It returns that other answer, or nil, and whether it
// asked with the valid body (when that was refused with 409) or the
// failing one.
func (r *runner) waitForLock(ctx context.Context, op *operation, f2, v *answer, failedAt time.Time, j *judge) (*answer, bool) {
	deadline := failedAt.Add(r.cfg.LockTimeout + grace(r.cfg.LockTimeout))
	probedValid := v.status == http.StatusConflict
	probe := call{note: "the valid body again, after a wait", url: op.url, body: op.body, key: op.key}
	last := v
	if !probedValid {
		probe = call{note: "the same request again, after a wait", url: op.url, body: op.fault, key: op.key}
		last = f2
	}
	for polls := 0; polls < lockPolls; polls++ {
		remaining := time.Until(deadline)
		wait := remaining / time.Duration(lockPolls-polls)
		if ra := retryAfter(last); ra > wait && ra < remaining {
			wait = ra
		}
		if polls == lockPolls-1 {
			wait = remaining // the last time, at the deadline
		}
		select {
		case <-ctx.Done():
			j.error("canceled while the key was locked: %v", ctx.Err())
			return nil, probedValid
		case <-time.After(max(wait, 0)):
		}
		last = r.do(ctx, probe)
		j.show(last)
		if last.err != nil {
			j.error("the locked key, asked again, got no answer: %v", last.err)
			return nil, probedValid
		}
		if last.status != http.StatusConflict {
			return last, probedValid
		}
	}
	return nil, probedValid
}

// judgeLock judges NoCrashLock once the key answered 409 after a failure.
func judgeLock(j *judge, timeout time.Duration, f1, f2, v, freed *answer, failedAt time.Time) {
	conflict := f2
	if v.status == http.StatusConflict {
		conflict = v
	}
	if freed == nil {
		if len(j.errs) == 0 {
			j.fail("the key is still locked %s after the %d (%s), past -lock-timeout %s: a failure before the answer locks it for good, or longer than the endpoint says",
				time.Since(failedAt).Round(100*time.Millisecond), f1.status, conflict.describe(), timeout)
		}
	} else {
		j.note("the key answered 409 after the %d, and was free again within -lock-timeout %s: %s", f1.status, timeout, freed.describe())
	}
	switch ra := conflict.header.Get("Retry-After"); {
	case ra == "":
		j.advise("the 409 after the failure carries no Retry-After, so a client cannot tell when the key is free again")
	case retryAfter(conflict) > timeout+grace(timeout):
		j.advise("the 409 after the failure says Retry-After: %s, past -lock-timeout %s", ra, timeout)
	}
}

// retryAfter reads an answer's Retry-After in seconds; zero when it has
// none or another form.
func retryAfter(a *answer) time.Duration {
	if a == nil || a.header == nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(a.header.Get("Retry-After")))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// judgeErrorType judges ReplayErrorType on the error replays seen.
func judgeErrorType(j *judge, replays []errorReplay) {
	if len(replays) == 0 {
		j.notApplicable("no error answer was replayed: the endpoint stores none of those it was made to give")
		return
	}
	for _, p := range replays {
		j.show(p.original, p.replay)
		want, got := p.original.header.Get("Content-Type"), p.replay.header.Get("Content-Type")
		if got != want {
			j.advise("the replayed %d lost its Content-Type: %q, first %q", p.original.status, got, want)
			continue
		}
		j.note("the replayed %d kept its Content-Type (%s)", p.original.status, want)
	}
}

// only returns the judges of js among ids.
func only(js map[string]*judge, ids ...string) map[string]*judge {
	out := map[string]*judge{}
	for _, id := range ids {
		if j := js[id]; j != nil {
			out[id] = j
		}
	}
	return out
}

// errorAll says on every judge of js that the check could not run.
func errorAll(js map[string]*judge, format string, args ...any) {
	all(js, func(j *judge) { j.error(format, args...) })
}

// both applies f to the two judges.
func both(a, b *judge, f func(*judge)) {
	f(a)
	f(b)
}

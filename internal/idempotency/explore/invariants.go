package explore

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/idemkeys/payments/internal/idempotency"
)

// check holds the world at rest to the core's invariants, read from the
// outside service's ledger and the store's tables (docs/design/protocol.md
// names them):
//
//	one-effect   at most one effect per operation: per (scope, client key,
//	             kind) within one record's lifetime
//	no-orphan    a canceled call has no effect at the outside service (but
//	             one sent around the core)
//	at-rest      once the reconciler has run, every call has settled
//	answered     no record is left executing whose call has settled
//	names-it     a stored answer names the call made under its lifetime
//	one-answer   every final answer of one operation is the same
func (w *World) check() []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	calls := w.Store.Calls()
	byKey := map[string]idempotency.Call{}
	byID := map[ckey]idempotency.Call{}
	for _, c := range calls {
		byKey[c.Key] = c
		byID[ckey{c.Scope, c.ID}] = c
	}
	w.checkLedger(byKey, fail)
	for _, c := range calls {
		if !settled(c.State) {
			fail("at-rest: %s %s is still %s after the reconciler ran", c.Kind, c.ID, c.State)
		}
	}
	w.checkRecords(calls, byID, fail)
	w.checkAnswers(fail)
	return problems
}

// checkLedger holds the outside service's ledger to one-effect and
// no-orphan, given the calls by their outside key.
func (w *World) checkLedger(byKey map[string]idempotency.Call, fail func(format string, args ...any)) {
	type operation struct {
		scope, key, kind string
		life             int
	}
	effects := map[operation][]string{}
	for _, op := range w.Outside.Ledger() {
		c, ok := byKey[op.Key]
		switch {
		case !ok && !op.Around:
			fail("one-effect: the outside service executed %s %s, which no call of ours names", op.Kind, op.Key)
		case ok && c.ClientKey != "":
			o := operation{c.Scope, c.ClientKey, c.Kind, w.Store.LifetimeOfCall(c.Scope, c.ID)}
			effects[o] = append(effects[o], c.ID)
		}
		if ok && c.State == idempotency.CallCanceled && !op.Around {
			fail("no-orphan: %s %s was canceled, but the outside service executed it", c.Kind, c.ID)
		}
	}
	for _, o := range slices.SortedFunc(maps.Keys(effects), func(a, b operation) int {
		return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.key, b.key), cmp.Compare(a.kind, b.kind), cmp.Compare(a.life, b.life))
	}) {
		if ids := effects[o]; len(ids) > 1 {
			fail("one-effect: %d effects at the outside service for one operation (key %s, %s, lifetime %d): %s",
				len(ids), o.key, o.kind, o.life, strings.Join(ids, ", "))
		}
	}
}

// checkRecords holds the store's unexpired records to answered and
// names-it, given the calls and the calls by their scope and id.
func (w *World) checkRecords(calls []idempotency.Call, byID map[ckey]idempotency.Call, fail func(format string, args ...any)) {
	now := w.Clock.Now()
	for _, r := range w.Store.Records() {
		switch {
		case !r.ExpiresAt.After(now):
			// Expired: absent for every read, the key new again.
		case r.State == idempotency.StateExecuting:
			_, id, _ := strings.Cut(r.Point, ":")
			if c, ok := byID[ckey{r.Scope, id}]; ok && (c.State == idempotency.CallDone || c.State == idempotency.CallCanceled) {
				fail("answered: key %s is still executing at %s though its call settled (%s): the answer was never stored", r.Key, r.Point, c.State)
			}
		case r.State == idempotency.StateCompleted:
			life := w.Store.Lifetime(r.Scope, r.Key)
			for _, c := range calls {
				if c.Scope == r.Scope && c.ClientKey == r.Key && w.Store.LifetimeOfCall(c.Scope, c.ID) == life &&
					!bytes.Contains(r.Answer.Body, []byte(c.ID)) {
					fail("names-it: key %s stores %d %s, which does not name %s, the %s made under it", r.Key, r.Answer.Status, r.Answer.Body, c.ID, c.Kind)
				}
			}
		}
	}
}

// checkAnswers holds the final answers given to the actors to one-answer.
func (w *World) checkAnswers(fail func(format string, args ...any)) {
	type lifetime struct {
		scope, key string
		life       int
	}
	first := map[lifetime]Answered{}
	for _, a := range w.Answers() {
		if a.Refusal != nil || !a.Final {
			continue
		}
		l := lifetime{a.Scope, a.Key, a.Lifetime}
		f, ok := first[l]
		if !ok {
			first[l] = a
			continue
		}
		if f.Status != a.Status || !bytes.Equal(f.Body, a.Body) {
			fail("one-answer: key %s answered %d %s to %s, then %d %s to %s", a.Key, f.Status, f.Body, f.Actor, a.Status, a.Body, a.Actor)
		}
	}
}

func settled(s idempotency.CallState) bool {
	return s == idempotency.CallDone || s == idempotency.CallCanceled || s == idempotency.CallFlagged
}

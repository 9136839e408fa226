package idempotency

import (
	"context"
	"time"
)

// When the reconciler looks at a call: a new call's schedule, the backoff
// of one it looked at in vain, and the alert of one flagged.

// newCall is the ready call of a resource the owner is about to create,
// the n-th of its kind under the owner's key, its id and key derived with
// secret.
func (k *Keeper) newCall(ctx context.Context, o *Op, kind, prefix string, secret []byte, n int) *Call {
	c := k.call(ctx, o.scope, deriveID(secret, prefix, o.scope, o.key, kind, n), kind, secret, CallReady)
	c.ClientKey, c.RecordCreatedAt = o.key, o.created
	return c
}

// call is a new call in state, its key its id, derived with secret, and
// scheduled.
func (k *Keeper) call(ctx context.Context, scope, id, kind string, secret []byte, state CallState) *Call {
	now := k.now()
	c := &Call{Scope: scope, ID: id, Kind: kind, Key: id, KeyVersion: keyVersion, KeyFingerprint: KeyFingerprint(secret),
		State: state, AttemptedAt: now, CreatedAt: now, UpdatedAt: now}
	if k.cfg.TraceParent != nil {
		c.TraceParent = k.cfg.TraceParent(ctx)
	}
	k.schedule(c)
	return c
}

// schedule sets when the reconciler next looks at c, from its state: a
// ready or calling call once its maker's or intent's lock has run out, an
// unknown one at the next round, a settled one never.
func (k *Keeper) schedule(c *Call) {
	c.Checks = 0
	switch c.State {
	case CallReady:
		c.DueAt = c.AttemptedAt.Add(k.cfg.LockTimeout)
	case CallCalling:
		c.DueAt = c.IntentAt.Add(k.cfg.LockTimeout)
	case CallUnknown:
		c.DueAt = k.now()
	default:
		c.DueAt = time.Time{}
	}
}

// backoff reschedules a call the reconciler looked at in vain: a ready call
// at its cancel, if still to come; else after a pause that doubles with
// every look, up to maxBackoff.
func (k *Keeper) backoff(c *Call) {
	now := k.now()
	c.Checks++
	if cancel := c.AttemptedAt.Add(k.cfg.CancelAfter); c.State == CallReady && k.cfg.CancelAfter > 0 && cancel.After(now) {
		c.DueAt = cancel
		return
	}
	pause := k.cfg.ReconcileInterval << min(c.Checks-1, 8)
	c.DueAt = now.Add(min(pause, maxBackoff))
}

// maxBackoff bounds the pause between two looks at an unsettled call.
const maxBackoff = 5 * time.Minute

// flagged tells of a call whose outside answer failed the money check: one
// log line (never a key), and the observer's count (the alert).
func (k *Keeper) flagged(ctx context.Context, c *Call, err error) {
	k.cfg.Log.ErrorContext(ctx, "outside call flagged: the outside service's answer differs from ours; nothing applied",
		"kind", c.Kind, "scope", c.Scope, "resource_id", c.ID, "error", err)
	k.reconciled(c.Kind, reconcileFlagged)
}

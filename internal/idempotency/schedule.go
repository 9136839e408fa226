package idempotency

import (
	"context"
	"time"
)

// When the reconciler looks at a call: a new call's schedule, the backoff
// of one it looked at in vain, and the alert of one flagged.

// newCall is the call of a resource the owner is about to create: its id
// and key derived from the owner's key with secret, ready, due for a first
// look once the owner's lock has surely run out.
func (k *Keeper) newCall(ctx context.Context, o *Op, kind, prefix string, secret []byte) (*Call, error) {
	n, err := k.store.CountCalls(ctx, o.scope, o.key, kind, o.created)
	if err != nil {
		return nil, err
	}
	id := deriveID(secret, prefix, o.scope, o.key, kind, n)
	now := k.now()
	c := &Call{
		Scope: o.scope, ID: id, Kind: kind, ClientKey: o.key, RecordCreatedAt: o.created, Key: id, KeyVersion: keyVersion,
		KeyFingerprint: KeyFingerprint(secret),
		State:          CallReady, AttemptedAt: now, CreatedAt: now, UpdatedAt: now,
	}
	if k.cfg.TraceParent != nil {
		c.TraceParent = k.cfg.TraceParent(ctx)
	}
	k.schedule(c)
	return c, nil
}

// schedule sets when the reconciler next looks at c, from its state:
//
//	ready     once the lock of whoever made it has run out: the provider
//	          may hold a call made before calls were fenced; then at
//	          its cancel (see due below)
//	calling   once the intent's owner has surely lost its lock
//	unknown   at the next round
//	settled   never
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

// backoff reschedules a call the reconciler looked at without settling it:
// a ready call at its cancel, if that is still to come; otherwise after a
// pause that doubles with every fruitless look, up to maxBackoff.
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
	if k.cfg.OnReconcile != nil {
		k.cfg.OnReconcile(c.Kind, reconcileFlagged)
	}
}

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// pendingEvent is an event on its way to the webhook.
type pendingEvent struct {
	id, eventType string
	body          []byte // signed and sent as is, identical on every attempt
	duplicate     bool   // deliver a second copy after the first lands
}

// newEventLocked builds the event for object and registers its delivery, or
// returns nil when webhooks are off or the server is closed. The caller must
// hand the result to deliver, which ends the registration. It runs under
// s.mu, in the same critical section that made the object: the duplicate
// draw then comes in a fixed order, and Close cannot slip in between the
// check of closed and the WaitGroup's Add.
func (s *Server) newEventLocked(eventType string, object any) *pendingEvent {
	if s.cfg.WebhookURL == "" || s.closed {
		return nil
	}
	objectJSON, err := json.Marshal(object) // the same encoding writeJSON answers with
	if err != nil {
		s.log.Error("encode webhook object", "err", err)
		return nil
	}
	ev := Event{ID: newID("evt"), Type: eventType, Created: s.now().Unix(), Data: EventData{Object: objectJSON}}
	body, err := json.Marshal(ev)
	if err != nil {
		s.log.Error("encode webhook event", "err", err)
		return nil
	}
	s.deliveries.Add(1)
	return &pendingEvent{
		id:        ev.ID,
		eventType: eventType,
		body:      body,
		duplicate: s.cfg.DuplicateWebhookRate > 0 && s.rnd.Float64() < s.cfg.DuplicateWebhookRate,
	}
}

// deliver sends ev in the background; nil is a no-op. Delivery is at least
// once: each copy is retried with backoff until the receiver answers 2xx, up
// to WebhookMaxAttempts, and some events get a second copy on purpose.
//
// The deliveries carry the values of origin, the context of the request that
// caused the event (its trace above all), but end with the server, not with
// that request.
func (s *Server) deliver(origin context.Context, ev *pendingEvent) {
	if ev == nil {
		return
	}
	go func() {
		defer s.deliveries.Done()
		ctx, cancel := context.WithCancel(context.WithoutCancel(origin))
		defer cancel()
		defer context.AfterFunc(s.ctx, cancel)()
		if !sleep(s.ctx, s.cfg.WebhookDelay) {
			return
		}
		copies := 1
		if ev.duplicate {
			copies = 2
		}
		for range copies {
			if !s.deliverCopy(ctx, ev) {
				return
			}
		}
	}()
}

// deliverCopy makes the attempts for one copy of ev and says whether one of
// them landed.
func (s *Server) deliverCopy(ctx context.Context, ev *pendingEvent) bool {
	backoff := s.cfg.WebhookBackoff
	for attempt := 1; ; attempt++ {
		err := s.post(ctx, ev)
		if err == nil {
			return true
		}
		if s.ctx.Err() != nil {
			return false // closed: drop the event quietly
		}
		if attempt >= s.cfg.WebhookMaxAttempts {
			s.log.Error("webhook delivery gave up", "event", ev.id, "type", ev.eventType, "attempts", attempt, "err", err)
			return false
		}
		s.log.Warn("webhook delivery failed; will retry", "event", ev.id, "type", ev.eventType,
			"attempt", attempt, "retry_in", backoff, "err", err)
		if !sleep(s.ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, maxWebhookBackoff)
	}
}

// post makes one delivery attempt. Each attempt is signed afresh, with the
// time it is sent, so a retry an hour later still passes the receiver's
// five-minute check.
func (s *Server) post(ctx context.Context, ev *pendingEvent) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(ev.body))
	if err != nil {
		return fmt.Errorf("build webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "idemkeys-mock-provider")
	req.Header.Set(SignatureHeader, Sign(s.cfg.WebhookSecret, s.now(), ev.body))
	resp, err := s.cfg.WebhookClient.Do(req)
	if err != nil {
		return err
	}
	// Drain a little so the connection can be reused; the body is not read.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// sleep waits for d and reports true, or reports false as soon as ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Package receipts is the fork guide's example of an endpoint with an
// effect outside the database: POST /v1/orders/{id}/receipts mails a
// receipt through an outside mail service at most once per
// Idempotency-Key, across retries, concurrent copies, lost answers and
// crashes. Everything idempotent about it is the core's: the lines marked
// "wiring" below are all a fork writes for it (docs/guide/fork-as-template.md
// counts them); the rest is the endpoint's own business.
package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/sendhttp"
)

// Receipt is the resource: one mail about one order.
type Receipt struct {
	ID        string `gorm:"primaryKey"`
	Scope     string // the merchant
	OrderID   string
	To        string
	Status    string // "sending", "unknown", "sent" or "refused"
	MessageID string
	CreatedAt time.Time
}

// Table is the receipts table; a fork adds it in both migrations folders.
const Table = `CREATE TABLE receipts (id TEXT PRIMARY KEY, scope TEXT NOT NULL, order_id TEXT NOT NULL,
  "to" TEXT NOT NULL, status TEXT NOT NULL, message_id TEXT NOT NULL DEFAULT '', created_at TIMESTAMP NOT NULL)`

// Message is what the mail service answers about a mail it sent under a
// key: POST /v1/messages {"to", "subject"} sends one (201), GET
// /v1/messages?idempotency_key=K finds it (200, or 404 when none was sent).
type Message struct {
	ID  string `json:"id"`
	To  string `json:"to"`
	Key string `json:"key"`
	// Refused, on our side only, is why the mail service refused the mail
	// for good (a 4xx): nothing was sent.
	Refused string `json:"-"`
}

// Service sends receipts.
type Service struct {
	db      *gorm.DB
	mailURL string
	http    *http.Client
	effect  *idempotency.Effect[Receipt, Message]
}

// New registers the receipt's outside call with the Keeper.
func New(k *idempotency.Keeper, db *gorm.DB, mailURL string) *Service {
	s := &Service{db: db, mailURL: mailURL, http: &http.Client{Timeout: time.Second}}
	s.effect = idempotency.Register(k, idempotency.Effect[Receipt, Message]{ // wiring
		Kind: "receipt", Prefix: "rcpt_", // wiring
		Load:    s.load,                                                                                                   // wiring
		Send:    func(ctx context.Context, r Receipt, key string) (Message, error) { return s.mail(ctx, "POST", key, r) }, // wiring
		Find:    func(ctx context.Context, r Receipt, key string) (Message, error) { return s.mail(ctx, "GET", key, r) },  // wiring
		Check:   check,                                                                                                    // wiring
		Settle:  s.settle,                                                                                                 // wiring
		Unknown: func(ctx context.Context, r Receipt) (Receipt, error) { return s.move(ctx, r, "unknown", "") },           // wiring
		Answer:  answer,                                                                                                   // wiring
	}) // wiring
	return s
}

// Handle serves POST /v1/orders/{id}/receipts {"to": "..."} as op, the
// operation that owns the key's record; mount it as idem.Guarded(s.Handle).
func (s *Service) Handle(c *gin.Context, op *idempotency.Op) (idempotency.Answer, error) {
	var in struct{ To string }
	if err := json.NewDecoder(c.Request.Body).Decode(&in); err != nil || in.To == "" {
		return idempotency.Answer{Status: http.StatusBadRequest, Body: []byte(`{"error":"to is required"}`)}, nil
	}
	scope, order := c.GetString("merchant"), c.Param("id")
	r, err := s.effect.Run(c.Request.Context(), op, func(ctx context.Context, call idempotency.Call) (Receipt, error) { // wiring
		r := Receipt{ID: call.ID, Scope: scope, OrderID: order, To: in.To, Status: "sending", CreatedAt: time.Now().UTC()} // wiring: the call's derived id
		return r, dbtx.Conn(ctx, s.db).Create(&r).Error                                                                    // wiring: in the phase's transaction
	}) // wiring
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answer(r), nil
}

func (s *Service) load(ctx context.Context, scope, id string) (Receipt, error) {
	var r Receipt
	err := dbtx.Conn(ctx, s.db).Where("scope = ? AND id = ?", scope, id).Take(&r).Error
	return r, err
}

// settle applies the mail service's definitive answer: sent, or refused.
func (s *Service) settle(ctx context.Context, r Receipt, m Message) (Receipt, error) {
	if m.Refused != "" {
		return s.move(ctx, r, "refused", "")
	}
	return s.move(ctx, r, "sent", m.ID)
}

func (s *Service) move(ctx context.Context, r Receipt, status, messageID string) (Receipt, error) {
	r.Status, r.MessageID = status, messageID
	return r, dbtx.Conn(ctx, s.db).Model(&r).Select("status", "message_id").Updates(&r).Error
}

// mail sends the receipt (POST) or asks about it (GET) under the call's
// key; sendhttp.Do sorts the outcome. A 4xx to the POST is the mail service's
// definitive answer (it will refuse the same mail again): a Message marked
// refused, settled and answered for good, never an unknown outcome that a
// reconciler would send again and again.
func (s *Service) mail(ctx context.Context, method, key string, r Receipt) (Message, error) {
	body, _ := json.Marshal(map[string]string{"to": r.To, "subject": "Your receipt for " + r.OrderID})
	req, err := http.NewRequestWithContext(ctx, method, s.mailURL+"/v1/messages?idempotency_key="+key, bytes.NewReader(body))
	if err != nil {
		return Message{}, fmt.Errorf("%w: %w", idempotency.ErrNotExecuted, err)
	}
	req.Header.Set(idempotency.HeaderKey, key)
	status, data, err := sendhttp.Do(s.http, req, 1<<20)
	var m Message
	switch {
	case err != nil:
		return m, err
	case method == "GET" && status == http.StatusNotFound:
		return m, idempotency.ErrNoSuchCall
	case status >= 400 && method == "POST":
		return Message{Refused: string(bytes.TrimSpace(data))}, nil
	case status >= 400:
		return m, fmt.Errorf("asking the mail service about %s: %d %s", r.ID, status, data)
	}
	return m, json.Unmarshal(data, &m)
}

// check holds the mail service's answer to the receipt: the message it
// sent must be to our recipient.
func check(r Receipt, m Message) error {
	if m.Refused == "" && m.To != r.To {
		return fmt.Errorf("%w: message %s went to %q, receipt %s is for %q", idempotency.ErrMismatch, m.ID, m.To, r.ID, r.To)
	}
	return nil
}

// answer is what the client is told: 201 once sent and 422 once refused
// (final, stored and replayed), 202 while the outcome is unknown (the
// record stays open until a retry or the reconciler learns it).
func answer(r Receipt) idempotency.Answer {
	body, _ := json.Marshal(map[string]string{"id": r.ID, "status": r.Status, "message_id": r.MessageID})
	status := map[string]int{"sent": http.StatusCreated, "refused": http.StatusUnprocessableEntity}[r.Status]
	if status == 0 {
		status = http.StatusAccepted
	}
	return idempotency.Answer{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: body, Final: status != http.StatusAccepted}
}

// Problem is the example's whole error table: the layer's refusals and the
// call's, by status, none of them stored.
func Problem(c *gin.Context, err error) idempotency.Answer {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, idempotency.ErrKeyMissing), errors.Is(err, idempotency.ErrKeyInvalid), errors.Is(err, idempotency.ErrMalformedBody):
		status = http.StatusBadRequest
	case errors.Is(err, idempotency.ErrKeyReused):
		status = http.StatusUnprocessableEntity
	case errors.Is(err, idempotency.ErrInProgress), errors.Is(err, idempotency.ErrFenced):
		status = http.StatusConflict
	case errors.Is(err, idempotency.ErrNotExecuted):
		status = http.StatusBadGateway
	}
	body, _ := json.Marshal(map[string]string{"error": err.Error()})
	return idempotency.Answer{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
}

// Command floorapi is the floor that tools/bench measures the API against:
// the least a Go program does to serve the bench's idempotent
// POST /v1/orders on this stack. It has net/http, encoding/json and pgx,
// and nothing else: no Gin, no GORM or database/sql, no authentication, no
// validation beyond the JSON's shape, no canonical fingerprint, no limits,
// no logs, no metrics, no outbox dispatcher. A create decodes the order,
// sends the API's three statements (the order, its outbox event, the
// record: tools/bench/rawsql) in one pgx batch, and keeps the answer in
// memory; a replay of the same key and the same bytes is answered from
// there, with Idempotent-Replayed: true, as the API's in-process cache
// answers one.
//
// What the API spends per request beyond this program is what its layers
// cost; what this program spends is what no Go service of this shape gets
// under on this machine. Never serve traffic with it.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/tools/bench/rawsql"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "floorapi:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	app.TuneGC(os.Environ()) // the API's garbage collector target
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(os.Getenv("DB_MAX_CONNS")); err == nil {
		cfg.MaxConns = int32(n)
	}
	database.LetFinish(cfg.ConnConfig) // as the API's connections do
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	// The merchant its orders belong to, seeded as the API seeds its demo
	// merchants at start.
	if _, err := pool.Exec(ctx, `INSERT INTO merchants (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		merchant, "acme", time.Now().UTC()); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", os.Getenv("HTTP_ADDR"))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: &floor{pool: pool, reads: os.Getenv("FLOOR_READS") == "1"}, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// merchant owns every order: the floor authenticates no one.
const merchant = "mch_acme"

type floor struct {
	pool    *pgxpool.Pool
	answers sync.Map // Idempotency-Key → *answer
	reads   bool     // look a key missing from answers up in PostgreSQL
}

// answer is a create's answer, kept for its replays.
type answer struct {
	fingerprint [sha256.Size]byte
	location    string
	body        []byte
}

// event is the outbox event's payload.
type event struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Currency    string `json:"currency"`
	CustomerID  string `json:"customer_id"`
	AmountTotal int64  `json:"amount_total"`
}

func (f *floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		if err := f.pool.Ping(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/orders" {
		http.NotFound(w, r)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil || key == "" {
		http.Error(w, "a body of at most 1 MiB and an Idempotency-Key", http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(body)
	if a, ok := f.answers.Load(key); ok {
		f.replay(w, a.(*answer), sum)
		return
	}
	if f.reads {
		a, err := f.read(r.Context(), key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if a != nil {
			f.replay(w, a, sum)
			return
		}
	}
	var req handlers.CreateOrderRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a, err := f.create(r.Context(), key, sum, req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	f.answers.Store(key, a)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Location", a.location)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(a.body)
}

// replay sends a's answer again when the request's bytes are the first's.
func (f *floor) replay(w http.ResponseWriter, a *answer, sum [sha256.Size]byte) {
	if a.fingerprint != sum {
		http.Error(w, "the key was used with another body", http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Location", a.location)
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(a.body)
}

// read is the answer stored under key, or nil when there is none.
func (f *floor) read(ctx context.Context, key string) (*answer, error) {
	var (
		fingerprint string
		headers     []byte
		a           answer
	)
	err := f.pool.QueryRow(ctx, `SELECT fingerprint, response_headers, response_body FROM idempotency_records
WHERE merchant_id = $1 AND idempotency_key = $2`, merchant, key).Scan(&fingerprint, &headers, &a.body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var h struct {
		Location string `json:"Location"`
	}
	if err := json.Unmarshal(headers, &h); err != nil {
		return nil, err
	}
	a.location = h.Location
	if _, err := hex.Decode(a.fingerprint[:], []byte(fingerprint)); err != nil {
		return nil, err
	}
	return &a, nil
}

// create writes the order, its event and the record in one batch.
func (f *floor) create(ctx context.Context, key string, sum [sha256.Size]byte, req handlers.CreateOrderRequest) (*answer, error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	now := time.Now().UTC()
	resp := handlers.OrderResponse{ID: "ord_" + hex.EncodeToString(id[:]), Object: "order", CustomerID: req.CustomerID,
		Currency: req.Currency, Items: req.Items, Status: "pending_payment", Metadata: req.Metadata, Version: 1, CreatedAt: now}
	for _, it := range req.Items {
		resp.AmountTotal += it.Quantity * it.UnitAmount
	}
	a := &answer{fingerprint: sum, location: "/v1/orders/" + resp.ID}
	var items, metadata, payload, headers []byte
	for _, x := range []struct {
		into *[]byte
		v    any
	}{
		{&a.body, resp}, {&items, req.Items}, {&metadata, req.Metadata},
		{&payload, event{resp.ID, resp.Status, resp.Currency, resp.CustomerID, resp.AmountTotal}},
		{&headers, map[string]string{"Content-Type": "application/json; charset=utf-8", "Location": a.location}},
	} {
		var err error
		if *x.into, err = json.Marshal(x.v); err != nil {
			return nil, err
		}
	}
	batch := &pgx.Batch{}
	rawsql.Queue(batch, rawsql.Order{Merchant: merchant, ID: resp.ID, Customer: req.CustomerID, Currency: req.Currency,
		Items: string(items), Metadata: string(metadata), Total: resp.AmountTotal, Event: string(payload)},
		&rawsql.Record{Key: key, Fingerprint: hex.EncodeToString(sum[:]), Headers: string(headers), Body: a.body, Sent: sum[:]}, now)
	return a, f.pool.SendBatch(ctx, batch).Close()
}

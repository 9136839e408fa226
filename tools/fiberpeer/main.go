// Command fiberpeer is a small order API built the way a Fiber v3 team
// would build it: Fiber's own idempotency middleware with its defaults
// (header X-Idempotency-Key, 36-character keys, answers kept 30 minutes in
// memory), in front of handlers that create orders. idemcheck's tests run
// the catalogue against it, and docs/guide/idemcheck.md shows its report
// beside this project's.
//
// With DATABASE_URL set (and DB_MAX_CONNS, 20 by default), the orders and
// the middleware's stored answers live in PostgreSQL instead (postgres.go),
// so that two instances share them: tools/bench retries on one instance
// the keys created on the other, as it does with the API.
//
// It is a module of its own, so that the product module never depends on
// Fiber. It serves, on HTTP_ADDR (default 127.0.0.1:8090):
//
//	POST /v1/orders     {"customer_id": "...", "amount": 1250} -> 201 order, Location
//	POST /v1/customers  {"customer_id": "...", "amount": 1250} -> 201 customer (another path)
//	GET  /v1/orders?customer_id=...                             -> {"data": [orders]}
//	GET  /healthz
//
// Credentials are "Authorization: Bearer sk_a" or "sk_b". An amount that is
// not positive is 400; customer_id "fail" is 503, before any effect. An
// order takes a few milliseconds to create, as real work does.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/idempotency"
)

type order struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	CustomerID string `json:"customer_id"`
	Amount     int    `json:"amount"`
}

// orders is where the shop keeps what it creates: memory, or PostgreSQL
// (postgres.go).
type orders interface {
	// add keeps a new order (or customer) of merchant m, the shop's nth
	// call, and answers it with its id.
	add(ctx context.Context, m string, n int64, o order) (order, error)
	// list is m's orders for one customer, oldest first.
	list(ctx context.Context, m, customerID string) ([]order, error)
}

type shop struct {
	next  atomic.Int64 // calls to create so far, which number the 503s
	store orders
}

// memory keeps the orders in this process; an order takes a few
// milliseconds to create, as real work does.
type memory struct {
	mu     sync.Mutex
	orders map[string][]order // by merchant
}

func (s *memory) add(_ context.Context, m string, n int64, o order) (order, error) {
	time.Sleep(20 * time.Millisecond) // the work
	o.ID = idOf(o.Object, n)
	if o.Object == "order" {
		s.mu.Lock()
		s.orders[m] = append(s.orders[m], o)
		s.mu.Unlock()
	}
	return o, nil
}

func (s *memory) list(_ context.Context, m, customerID string) ([]order, error) {
	data := []order{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.orders[m] {
		if o.CustomerID == customerID {
			data = append(data, o)
		}
	}
	return data, nil
}

// idOf is the id of the nth order or customer: "ord_12", "cus_13".
func idOf(object string, n int64) string {
	return fmt.Sprintf("%s_%d", object[:3], n)
}

func merchant(c fiber.Ctx) string {
	switch c.Get("Authorization") {
	case "Bearer sk_a":
		return "a"
	case "Bearer sk_b":
		return "b"
	}
	return ""
}

func problem(c fiber.Ctx, status int, code string) error {
	c.Status(status)
	c.Set("Content-Type", "application/problem+json")
	return c.Send([]byte(fmt.Sprintf(`{"type":"about:blank","title":%q,"status":%d,"code":%q}`, code, status, code)))
}

func (s *shop) create(object string) fiber.Handler {
	return func(c fiber.Ctx) error {
		m := merchant(c)
		if m == "" {
			return problem(c, fiber.StatusUnauthorized, "unauthorized")
		}
		var in struct {
			CustomerID string `json:"customer_id"`
			Amount     int    `json:"amount"`
		}
		if err := json.Unmarshal(c.Body(), &in); err != nil || in.Amount <= 0 || in.CustomerID == "" {
			return problem(c, fiber.StatusBadRequest, "validation_failed")
		}
		n := s.next.Add(1)
		if in.CustomerID == "fail" {
			// Numbered, so that a 503 sent again differs from one replayed.
			return problem(c, fiber.StatusServiceUnavailable, fmt.Sprintf("unavailable_%d", n))
		}
		o, err := s.store.add(c, m, n, order{Object: object, CustomerID: in.CustomerID, Amount: in.Amount})
		if err != nil {
			return problem(c, fiber.StatusInternalServerError, "internal_error")
		}
		c.Location(c.Path() + "/" + o.ID)
		return c.Status(fiber.StatusCreated).JSON(o)
	}
}

func (s *shop) list(c fiber.Ctx) error {
	m := merchant(c)
	if m == "" {
		return problem(c, fiber.StatusUnauthorized, "unauthorized")
	}
	data, err := s.store.list(c, m, c.Query("customer_id"))
	if err != nil {
		return problem(c, fiber.StatusInternalServerError, "internal_error")
	}
	return c.JSON(fiber.Map{"object": "list", "data": data})
}

func main() {
	addr := os.Getenv("HTTP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8090"
	}
	s := &shop{store: &memory{orders: map[string][]order{}}}
	answers := idempotency.ConfigDefault
	if url := os.Getenv("DATABASE_URL"); url != "" {
		pg, err := openPostgres(context.Background(), url, os.Getenv("DB_MAX_CONNS"))
		if err != nil {
			log.Fatal(err)
		}
		defer pg.Close()
		s.store, answers.Storage = pg, pg
	}
	app := fiber.New()
	app.Use(idempotency.New(answers))
	app.Get("/healthz", func(c fiber.Ctx) error { return c.SendString("ok") })
	app.Post("/v1/orders", s.create("order"))
	app.Post("/v1/customers", s.create("customer"))
	app.Get("/v1/orders", s.list)

	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
		<-stop
		_ = app.ShutdownWithTimeout(5 * time.Second)
	}()
	if err := app.Listen(addr, fiber.ListenConfig{DisableStartupMessage: true}); err != nil {
		log.Fatal(err)
	}
}

package handlers

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency/ginidem"
)

// DefaultMaxBodyBytes bounds request bodies when Deps.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// Deps is what the router needs. Auth, Orders, Atomic and Database are
// required. Payments is optional (without it the payment, refund and
// webhook routes are not served, for tests of orders alone); with it,
// Guarded and VerifyWebhook are required too.
type Deps struct {
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client (config.Config.TrustedProxies); nil trusts none.
	TrustedProxies []string
	// Log receives the access log and internal errors; nil means
	// slog.Default().
	Log *slog.Logger
	// Auth resolves API keys (merchants.Store).
	Auth Authenticator
	// Orders runs the order use cases (payments.Service).
	Orders OrderService
	// Atomic serves a keyed POST route whose whole work is one database
	// transaction (ginidem.Middleware.Atomic): the handler's rows and the
	// idempotency record commit together.
	Atomic func(ginidem.Handler) gin.HandlerFunc
	// Customers runs the customer use cases (payments.Service); nil leaves
	// the /v1/customers routes out.
	Customers CustomerService
	// Payments runs the payment, refund and provider-event use cases
	// (payments.Service).
	Payments PaymentService
	// Guarded serves a keyed POST route whose work has an effect outside
	// the database, a provider call (ginidem.Middleware.Guarded).
	Guarded func(ginidem.GuardedHandler) gin.HandlerFunc
	// VerifyWebhook checks the Provider-Signature header of a provider
	// webhook against its raw body (provider.VerifySignature with the
	// shared secret); any error refuses the event with 401.
	VerifyWebhook func(header string, body []byte) error
	// Database is checked by /readyz (*database.DB).
	Database Pinger
	// Redis is checked by /readyz; nil (an untyped nil) when the Redis
	// layer is off.
	Redis Pinger
	// OutboxSink is where the outbox publishes, for /readyz: OutboxRedis,
	// OutboxNATS or OutboxLog; empty means OutboxLog.
	OutboxSink string
	// NATS is checked by /readyz when the outbox publishes to NATS; nil
	// otherwise.
	NATS Pinger
	// ProviderBreakers, if set, tells /readyz how many of the provider
	// client's circuit breakers are open (provider.Client.OpenBreakers):
	// any makes it degraded, still 200.
	ProviderBreakers func() int
	// MaxBodyBytes bounds request bodies; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ReadTimeout is the server's read timeout, if any: a webhook's body is
	// read within it or WebhookReadTimeout, whichever is shorter.
	ReadTimeout time.Duration
	// IdempotencyKeys serves GET /v1/idempotency-keys/{key}
	// (idempotency.Store); nil leaves the route out.
	IdempotencyKeys KeyLookup
	// HashKey turns an Idempotency-Key into the short keyed hash the
	// access log carries instead (NewKeyHasher); nil means NewKeyHasher
	// with a random per-process secret.
	HashKey func(key string) string
	// Middleware runs on every request (metrics), after the request id,
	// logging and recovery and before authentication. Gin applies
	// middleware only to routes registered after it, so it must come in here
	// rather than be added to the engine later.
	Middleware []gin.HandlerFunc
	// DemoAPIKey is the API key the /demo page fills in; empty (production)
	// leaves the field for the user.
	DemoAPIKey string
	// MaxWritesPerResource bounds the writes to one order or payment at
	// work at once (resourceGate); the next waits up to ResourceWait for a
	// turn, holding no database connection, then gets 503. Zero: no bound.
	MaxWritesPerResource int
	ResourceWait         time.Duration
	// Tracing, if set, runs first on every request: it starts the request's
	// server span (app.traceRequests), so that the access log line, the
	// recovery's 500 and everything after them happen inside it. The request's id, merchant
	// and key hash are put on that span; a key in the path never is.
	Tracing gin.HandlerFunc
}

// NewRouter builds the Gin engine of the API. Routes that need nothing from
// Deps (/metrics, /swagger/*) may be added to it afterwards. It panics when
// a required dependency is missing: a wiring mistake should stop the process
// at start, not answer 500 later.
func NewRouter(d Deps) *gin.Engine {
	d.mustBeComplete()
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	hashKey := d.HashKey
	if hashKey == nil {
		hashKey = NewKeyHasher(nil)
	}
	maxBody := d.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}

	r := gin.New()
	// No proxy is trusted until one is configured (TRUSTED_PROXIES): the
	// client address (the unknown-key budget's) is the TCP peer's, and
	// X-Forwarded-For is believed only from a trusted proxy.
	if err := r.SetTrustedProxies(d.TrustedProxies); err != nil {
		_ = r.SetTrustedProxies(nil) // validated by config; never reached
	}
	// A path with a trailing slash is a path no route serves: 404
	// problem+json, not Gin's 301 with an HTML body.
	r.RedirectTrailingSlash = false
	if d.Tracing != nil {
		r.Use(d.Tracing)
	}
	r.Use(requestContext(log, hashKey, r.Routes), recovery())
	r.Use(d.Middleware...)

	auth := authenticate(d.Auth)
	r.NoRoute(unrouted(auth, noRoute))
	// A path served with other methods is 405 with Allow (RFC 9110), not
	// 404.
	r.HandleMethodNotAllowed = true
	r.NoMethod(unrouted(auth, methodNotAllowed))

	sink := d.OutboxSink
	if sink == "" {
		sink = OutboxLog
	}
	health := &healthHandlers{db: d.Database, redis: d.Redis, outbox: sink, nats: d.NATS, breakers: d.ProviderBreakers}
	r.GET("/healthz", Serve(health.healthz))
	r.GET("/readyz", Serve(health.readyz))
	r.GET("/demo", demoPage(d.DemoAPIKey))

	// Every /v1 route checks the API key before anything else, the body
	// limit included: a request without a valid key learns nothing more.
	// The provider webhook (signed, not keyed) is registered on r itself,
	// with limitBody but without auth.
	// requireJSONBodies (contenttype.go): a POST or PUT body that is not
	// declared as JSON is 415 before the idempotency middleware reserves a key.
	v1 := r.Group("/v1", auth, limitBody(maxBody), knownIDs(), requireJSONBodies())

	// Every write to an existing order or payment locks its row: gate
	// bounds how many wait on one such row at once.
	gate := newResourceGate(d.MaxWritesPerResource, d.ResourceWait)
	routeOrders(v1, d, gate)
	if d.Payments != nil {
		routePayments(r, v1, d, gate, maxBody)
	}
	return r
}

// routeOrders adds the order routes to v1, and the customer and
// idempotency-key routes when d has their services.
func routeOrders(v1 *gin.RouterGroup, d Deps, gate *resourceGate) {
	orders := &orderHandlers{orders: d.Orders}
	v1.POST("/orders", d.Atomic(orders.createOrder))
	v1.GET("/orders", Serve(orders.listOrders))
	v1.GET("/orders/:id", Serve(orders.getOrder))
	// Desired state needs no key: repeating the PUT is harmless by itself.
	// Adding an item is cumulative, so it is keyed like creating an order.
	v1.PUT("/orders/:id/shipping-address", Serve(gate.hold(orders.putShippingAddress)))
	v1.POST("/orders/:id/items", d.Atomic(gate.hold(orders.addOrderItem)))

	if d.Customers != nil {
		// Atomic like an order: the customer and its record commit
		// together, and its natural key's clash (409 customer_exists) is
		// stored after the transaction rolled back.
		customers := &customerHandlers{customers: d.Customers}
		v1.POST("/customers", d.Atomic(customers.createCustomer))
		v1.GET("/customers/:id", Serve(customers.getCustomer))
	}

	if d.IdempotencyKeys != nil {
		keys := &keyHandlers{keys: d.IdempotencyKeys}
		v1.GET(strings.TrimPrefix(routeIdempotencyKey, "/v1"), Serve(keys.getIdempotencyKey))
	}
}

// mustBeComplete panics when a dependency NewRouter requires is missing.
func (d Deps) mustBeComplete() {
	switch {
	case d.Auth == nil:
		panic("handlers: Deps.Auth is required")
	case d.Orders == nil:
		panic("handlers: Deps.Orders is required")
	case d.Atomic == nil:
		panic("handlers: Deps.Atomic is required")
	case d.Database == nil:
		panic("handlers: Deps.Database is required")
	case d.Payments != nil && d.Guarded == nil:
		panic("handlers: Deps.Guarded is required with Deps.Payments")
	case d.Payments != nil && d.VerifyWebhook == nil:
		panic("handlers: Deps.VerifyWebhook is required with Deps.Payments")
	}
}

// routePayments adds the payment and refund routes to v1 and the
// provider's webhook to r.
func routePayments(r *gin.Engine, v1 *gin.RouterGroup, d Deps, gate *resourceGate, maxBody int64) {
	// Guarded, not Atomic: a provider call cannot roll back with a
	// transaction, so the key is reserved first and the operation
	// records recovery points as it goes.
	pay := &paymentHandlers{payments: d.Payments}
	v1.POST("/orders/:id/payments", d.Guarded(gate.holdGuarded(pay.payOrder)))
	v1.GET("/payments/:id", Serve(pay.getPayment))
	v1.POST("/payments/:id/refunds", d.Guarded(gate.holdGuarded(pay.refundPayment)))
	v1.GET("/refunds/:id", Serve(pay.getRefund))

	// Deduplicated by event id in the service, not by Idempotency-Key.
	hooks := &webhookHandlers{payments: d.Payments, verify: d.VerifyWebhook}
	readTimeout := WebhookReadTimeout
	if d.ReadTimeout > 0 {
		readTimeout = min(readTimeout, d.ReadTimeout)
	}
	// The read deadline comes first: whatever refuses the body, what
	// net/http reads of the rest is read within it. requireJSON
	// (contenttype.go): as for the /v1 group.
	r.POST("/v1/webhooks/provider", readDeadline(readTimeout), limitBody(min(maxBody, WebhookMaxBodyBytes)), requireJSON(),
		Serve(hooks.receiveProviderEvent))
}

// NewAdminRouter is production's admin listener: /metrics (the platform's
// figures, every merchant's together) and the health probes, which api (the
// API's router) answers as on its own port. Anything else is 404
// problem+json: the API itself is not served there.
func NewAdminRouter(metrics, api http.Handler) *gin.Engine {
	r := gin.New()
	_ = r.SetTrustedProxies(nil)
	r.RedirectTrailingSlash = false
	r.Use(recovery())
	r.GET("/metrics", gin.WrapH(metrics))
	r.GET("/healthz", gin.WrapH(api))
	r.GET("/readyz", gin.WrapH(api))
	r.NoRoute(func(c *gin.Context) { RenderError(c, noRoute(c)) })
	r.HandleMethodNotAllowed = true
	r.NoMethod(func(c *gin.Context) { RenderError(c, methodNotAllowed(c)) })
	return r
}

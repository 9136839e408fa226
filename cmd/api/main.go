// Command api is the payments API: orders, payments and refunds behind
// Idempotency-Key, over PostgreSQL or an embedded SQLite file.
//
// Usage:
//
//	api                          serve (the default)
//	api migrate                  apply the migrations and exit
//	api create-merchant -name N  create a merchant and print its API key once
//	api flagged [retry|accept|fail|resolve -merchant M -id ID]
//	                             list, or act on, what waits for an operator
//	api revoke-demo-keys         delete the demo merchants' public API keys
//	                             (production refuses a database holding them)
//	api repair-events            write the outbox events that payments and
//	                             refunds settled by an operator never wrote
//
// Configuration comes from the environment; see internal/config. The
// wiring lives in internal/app.
//
//	@title			Idempotent Payments API
//	@version		1.0
//	@description	A reference payments backend for idempotency keys done right: every POST carries an Idempotency-Key, and for one merchant and one key the business effect happens at most once. A repeat gets the stored answer with Idempotent-Replayed: true; a different request under the same key gets 422; a repeat while the original runs waits, then gets 409 with Retry-After. Success bodies are application/json, problems application/problem+json (RFC 9457), times RFC 3339 in UTC.
//	@license.name	MIT
//	@contact.name	The maintainers of this reference
//	@contact.url	https://github.com/idemkeys/payments/issues
//	@externalDocs.description	The idempotency rules: what a key means, what is stored and replayed, and when
//	@externalDocs.url	https://github.com/idemkeys/payments/blob/main/docs/reference/api.md#idempotency-rules
//	@servers.url	/
//	@tag.name		orders
//	@tag.description	Orders, their items and shipping address
//	@tag.name		customers
//	@tag.description	The merchant's customers, one per email
//	@tag.name		payments
//	@tag.description	Paying orders and refunding payments through the provider
//	@tag.name		idempotency
//	@tag.description	What the API keeps under an Idempotency-Key
//	@tag.name		webhooks
//	@tag.description	Events from the payment provider, signed instead of keyed
//	@tag.name		health
//	@tag.description	Probes; no API key
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/config"
)

// The OpenAPI security scheme, in a comment group of its own: swag reads a
// bearer scheme's lines to the end of their group. Swagger UI's Authorize
// takes the bare key and sends "Authorization: Bearer <key>".
//
//	@securityDefinitions.bearerauth	BearerAuth
//	@description					The API key itself, e.g. sk_test_acme; it is sent as `Authorization: Bearer <key>`.

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

// run is the whole program behind main: it returns when ctx ends (after a
// graceful stop) or on a fatal error.
func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	cfg, err := config.Load(environ)
	if err != nil {
		return err
	}
	logs := stdout
	if cmd == "serve" {
		// Lines gathered for a moment and written together: a server
		// logs a line per request (app.BufferedLog).
		var flush func()
		logs, flush = app.BufferedLog(stdout)
		defer flush()
	}
	log := app.LoggerFor(logs, cfg)

	switch cmd {
	case "serve":
		log.DebugContext(ctx, "garbage collector", "gogc", app.TuneGC(environ))
		return app.Run(ctx, cfg, log)
	case "migrate":
		return app.Migrate(ctx, cfg, log, stdout)
	case "create-merchant":
		fs := flag.NewFlagSet("create-merchant", flag.ContinueOnError)
		name := fs.String("name", "", "merchant name (unique)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return app.CreateMerchant(ctx, cfg, log, *name, stdout)
	case "flagged":
		return app.Flagged(ctx, cfg, log, args, stdout)
	case "revoke-demo-keys":
		return app.RevokeDemoKeys(ctx, cfg, log, stdout)
	case "repair-events":
		return app.RepairEvents(ctx, cfg, log, stdout)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: api [serve | migrate | create-merchant -name NAME | flagged [retry|accept|fail|resolve -merchant M -id ID] | revoke-demo-keys | repair-events]")
		return nil
	default:
		return fmt.Errorf("unknown command %q (try: serve, migrate, create-merchant, flagged, revoke-demo-keys, repair-events)", cmd)
	}
}

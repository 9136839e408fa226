// Command api is the payments API: orders, payments and refunds behind
// Idempotency-Key, over PostgreSQL or an embedded SQLite file.
//
// Usage:
//
//	api                          serve (the default)
//	api migrate                  apply the migrations and exit
//	api create-merchant -name N  create a merchant and print its API key once
//
// Configuration comes from the environment; see internal/config. The
// wiring lives in internal/app.
//
//	@title						Idempotent Payments API
//	@version					1.0
//	@description				A reference payments backend for idempotency keys done right: every POST carries an Idempotency-Key, and for one merchant and one key the business effect happens at most once. A repeat gets the stored answer with Idempotent-Replayed: true; a different request under the same key gets 422; a repeat while the original runs waits, then gets 409 with Retry-After.
//	@BasePath					/
//	@securityDefinitions.apikey	ApiKeyAuth
//	@in							header
//	@name						Authorization
//	@description				"Bearer " followed by the API key, e.g. "Bearer sk_test_acme".
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
	log := app.NewLogger(stdout, cfg.LogLevel)

	switch cmd {
	case "serve":
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
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: api [serve | migrate | create-merchant -name NAME]")
		return nil
	default:
		return fmt.Errorf("unknown command %q (try: serve, migrate, create-merchant)", cmd)
	}
}

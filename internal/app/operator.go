package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/provider/paymentsport"
)

// refuseDemoKeys is production's check of the database it starts on: a
// database first used in development still holds the demo merchants'
// public API keys, which would open it to anyone who read the README.
func refuseDemoKeys(ctx context.Context, store *merchants.Store) error {
	held, err := store.DemoKeysHeld(ctx)
	if err != nil {
		return err
	}
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("production (APP_ENV=production) refuses to start: the database holds the public API keys of the demo merchants %s (seeded in development); revoke them with `api revoke-demo-keys` (the merchants and their data stay)",
		strings.Join(held, ", "))
}

// warnDemoKeys is production's word when a demo key reaches its database
// after the check at start (a replica started without APP_ENV=production
// seeds them): the keys are answered 401 all the same, and the operator
// learns which to revoke. It names merchants, never a key.
func warnDemoKeys(log *slog.Logger) func(names []string) {
	return func(names []string) {
		log.Warn("production (APP_ENV=production) refuses the public API keys of demo merchants that the database now holds (an instance without APP_ENV=production seeded them?); they are answered 401; revoke them with `api revoke-demo-keys`",
			"demo_merchants", strings.Join(names, ", "))
	}
}

// demoPageKey is the API key /demo fills in: the public demo key in
// development, none in production (the page then asks for one).
func demoPageKey(cfg config.Config) string {
	if cfg.Production() {
		return ""
	}
	return merchants.DemoAPIKey
}

// RevokeDemoKeys is api revoke-demo-keys: it deletes the demo merchants'
// public API keys from the database, so that production may start on a
// database that development seeded. It is harmless to run again.
func RevokeDemoKeys(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer) error {
	db, err := openDatabase(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	revoked, err := merchants.NewStore(db.DB, time.Now).RevokeDemoKeys(ctx)
	if err != nil {
		return err
	}
	if len(revoked) == 0 {
		fmt.Fprintln(stdout, "no demo API key in the database")
		return nil
	}
	fmt.Fprintf(stdout, "revoked the demo API keys of %s; their merchants and data stay\n", strings.Join(revoked, ", "))
	return nil
}

// checkKeySecret is the start's check of PROVIDER_KEY_SECRET against the
// secret that derived the calls a retry may still reach (those made within
// IDEMPOTENCY_TTL): a different secret would derive other provider keys
// for the same operations, and a retry whose rows were lost (a failover)
// would then be charged twice. It refuses to start, naming the settings,
// unless PROVIDER_KEY_SECRET_PREVIOUS is that secret (a rotation: new
// operations then look for a call under the old secret's key first).
func checkKeySecret(ctx context.Context, cfg config.Config, store *gormstore.Store) error {
	current := idempotency.KeyFingerprint([]byte(cfg.ProviderKeySecret))
	var known []string
	for _, s := range previousKeySecrets(cfg) {
		known = append(known, idempotency.KeyFingerprint(s))
	}
	other, err := store.KeyFingerprints(ctx, current, known, time.Now().Add(-cfg.IdempotencyTTL))
	if err != nil || other == "" {
		return err
	}
	return fmt.Errorf("PROVIDER_KEY_SECRET is not the secret that derived the provider keys of the last IDEMPOTENCY_TTL (theirs has fingerprint %s, this one %s): a retry of one of those operations would get another provider key and could be charged twice. Restore the old PROVIDER_KEY_SECRET, or rotate: keep the new one and set PROVIDER_KEY_SECRET_PREVIOUS to the old one (docs/guide/operations.md, \"Rotating PROVIDER_KEY_SECRET\")",
		other, current)
}

// previousKeySecrets is PROVIDER_KEY_SECRET_PREVIOUS, as the keeper takes it.
func previousKeySecrets(cfg config.Config) [][]byte {
	if cfg.ProviderKeySecretPrevious == "" {
		return nil
	}
	return [][]byte{[]byte(cfg.ProviderKeySecretPrevious)}
}

// paymentsService builds the payments Service over store: the one the API
// serves and its reconciler runs, and the one the operator's commands use,
// so that every path that moves a payment or a refund writes its outbox
// event (an operator's accepted payment wrote none when a command built a
// Service of its own without them). provider and keeper may be nil for a
// command that calls neither; extra adds the server's own options.
func paymentsService(store *paymentsdb.Store, provider payments.Provider, keeper *idempotency.Keeper, extra ...payments.Option) *payments.Service {
	opts := []payments.Option{payments.WithPayments(store, provider), payments.WithEvents(store), payments.WithCustomers(store)}
	if keeper != nil {
		opts = append(opts, payments.WithOutsideCalls(keeper, answers.Payment, answers.Refund))
	}
	return payments.NewService(store, time.Now, append(opts, extra...)...)
}

// RepairEvents is api repair-events: it writes the outbox event of every
// payment and refund that ended within EVENT_RETENTION without one (those
// an operator accepted before the commands wrote events), once: run again,
// it writes nothing. Older ones would have been purged from the outbox
// anyway, so nothing tells a missing event from a purged one.
func RepairEvents(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer) error {
	db, err := openDatabase(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	store := paymentsdb.New(db.DB)
	n, err := paymentsService(store, nil, nil).RepairEvents(ctx, store, time.Now().Add(-cfg.EventRetention))
	if err != nil {
		return fmt.Errorf("repair-events: %w (%d written before)", err, n)
	}
	fmt.Fprintf(stdout, "wrote %d missing outbox events\n", n)
	return nil
}

// flaggedUsage is api flagged's help.
const flaggedUsage = `usage:
  api flagged                                   list what waits for an operator
  api flagged retry   -merchant M -id pay_…     ask the provider again and check its answer anew
  api flagged accept  -merchant M -id pay_…     apply the provider's answer as it is, unchecked
  api flagged fail    -merchant M -id pay_…     fail it: the provider's wrong charge is refunded
                                                automatically, the key answers 402, the order
                                                can be paid again with a new key
  api flagged resolve -merchant M -id orf_…     mark an orphan handled by hand

A flagged call is a payment or refund whose provider answer failed the money
check (amount, currency, key or reference differ from ours): nothing was
applied and its order stays blocked. An orphan is a succeeded charge or
refund the provider holds for a payment or refund that ended without one: a
charge is refunded automatically (refunding, then refunded), a refund, or a
charge whose refund the provider refused, is flagged.
See docs/guide/operations.md, "Flagged calls and orphans".`

// flaggedListLimit bounds each list of api flagged.
const flaggedListLimit = 200

// Flagged is api flagged: it lists the flagged calls and the orphans, or
// acts on one (retry, accept, resolve). accept asks the provider, so it
// needs PROVIDER_URL; the in-process provider of development lives in the
// serving process only.
func Flagged(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	action := "list"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		action, args = args[0], args[1:]
	}
	switch action {
	case "list", "retry", "accept", "fail", "resolve":
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, flaggedUsage)
		return nil
	default:
		return fmt.Errorf("flagged: unknown action %q (try: list, retry, accept, fail, resolve)", action)
	}
	fs := flag.NewFlagSet("flagged "+action, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	merchant := fs.String("merchant", "", "the merchant's id (mer_…)")
	id := fs.String("id", "", "the payment's, refund's or orphan's id")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("flagged %s: %w\n%s", action, err, flaggedUsage)
	}
	if action != "list" && (*merchant == "" || *id == "") {
		return fmt.Errorf("flagged %s: -merchant and -id are required\n%s", action, flaggedUsage)
	}
	if (action == "accept" || action == "fail") && cfg.ProviderURL == "" {
		return fmt.Errorf("flagged %s asks the provider what it holds: set PROVIDER_URL (development's in-process provider is reachable from the serving process only)", action)
	}

	db, err := openDatabase(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	idemStore, _, err := idempotencyStore(cfg, db, log)
	if err != nil {
		return err
	}
	store := paymentsdb.New(db.DB)
	switch action {
	case "list":
		return listFlagged(ctx, idemStore.FlaggedCalls, store, stdout)
	case "resolve":
		if err := paymentsService(store, nil, nil).ResolveOrphan(ctx, *merchant, *id); err != nil {
			return fmt.Errorf("flagged resolve: %w", err)
		}
		fmt.Fprintf(stdout, "orphan %s resolved\n", *id)
		return nil
	}
	// retry, accept and fail move a call through its Effect, which the
	// payments service registers on a keeper of its own.
	keeper := idempotency.New(idemStore, keeperConfig(cfg, log, idemStore, nil))
	client := provider.NewClient(cfg.ProviderURL, provider.ClientOptions{Timeout: cfg.ProviderTimeout})
	service := paymentsService(store, paymentsport.New(client), keeper)
	switch action {
	case "fail":
		if err := service.FailFlagged(ctx, *merchant, *id); err != nil {
			return fmt.Errorf("flagged fail: %w", err)
		}
		fmt.Fprintf(stdout, "%s: failed; its key's answer stored, the provider's charge or refund handed to the orphans (a charge is refunded at the reconciler's next round)\n", *id)
	case "accept":
		if err := service.AcceptFlagged(ctx, *merchant, *id); err != nil {
			return fmt.Errorf("flagged accept: %w", err)
		}
		fmt.Fprintf(stdout, "%s: the provider's answer applied as it is; the client's answer stored\n", *id)
	default:
		if err := service.RetryFlagged(ctx, *merchant, *id); err != nil {
			return fmt.Errorf("flagged retry: %w", err)
		}
		fmt.Fprintf(stdout, "%s: back to the reconciler, which asks the provider at its next round\n", *id)
	}
	return nil
}

// listFlagged prints the flagged calls, then the orphans not refunded.
func listFlagged(ctx context.Context, flagged func(context.Context, int) ([]idempotency.Call, error), store *paymentsdb.Store, stdout io.Writer) error {
	calls, err := flagged(ctx, flaggedListLimit)
	if err != nil {
		return err
	}
	orphans, err := store.Orphans(ctx, flaggedListLimit, payments.OrphanFlagged, payments.OrphanRefunding)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "flagged calls: %d\n", len(calls))
	if len(calls) > 0 {
		fmt.Fprintln(w, "KIND\tMERCHANT\tID\tFLAGGED AT")
		for _, c := range calls {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Kind, c.Scope, c.ID, c.UpdatedAt.Format(time.RFC3339))
		}
	}
	fmt.Fprintf(w, "\norphans: %d\n", len(orphans))
	if len(orphans) > 0 {
		fmt.Fprintln(w, "ID\tMERCHANT\tKIND\tOURS\tPROVIDER'S\tAMOUNT\tSTATUS\tFOUND AT\tNOTE")
		for _, o := range orphans {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d %s\t%s\t%s\t%s\n", o.ID, o.MerchantID, o.Kind, o.ResourceID, o.ProviderID,
				o.Amount, o.Currency, o.Status, o.CreatedAt.Format(time.RFC3339), o.Note)
		}
	}
	return w.Flush()
}

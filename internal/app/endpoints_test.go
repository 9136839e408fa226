package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/idemcheck"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestEndpointsPassIdemcheck is the contract test every keyed endpoint
// runs: the conformance checker's own catalogue (internal/idemcheck, the
// package behind cmd/idemcheck), over loopback against two API instances
// on one database, on both dialects. The concurrent copies alternate
// between the instances, so "30 copies, one effect" holds across
// processes. A fork's new endpoint adds an entry here.
//
// Each endpoint's effects are counted where they land: orders and
// customers through the API, charges and refunds in the provider's own
// ledger, so a second charge cannot hide behind our database.
func TestEndpointsPassIdemcheck(t *testing.T) {
	testkit.EndToEnd(t) // two instances and about 400 requests per endpoint and dialect
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			env := apptest.Env("RECONCILE_INTERVAL=200ms")
			a := apptest.Start(t, dbURL, apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1}), env)
			// The second instance shares the database and the first one's
			// provider, as two replicas behind a balancer do.
			b := apptest.StartReplica(t, a, env)
			client := &http.Client{Transport: &alternate{hosts: []string{a.Addr, b.Addr}}, Timeout: 30 * time.Second}
			acme := http.Header{"Authorization": {"Bearer sk_test_acme"}}
			globex := http.Header{"Authorization": {"Bearer sk_test_globex"}}

			// newOrder and newPayment are the Prepare steps: a fresh order
			// to pay, a fresh succeeded payment to refund.
			newOrder := func(ctx context.Context) (string, error) {
				ans, err := apptest.Do(apptest.Request{Method: "POST", URL: a.URL + "/v1/orders", APIKey: "sk_test_acme", Key: apptest.NewKey(), Body: apptest.OrderBody})
				if err != nil || ans.Status != 201 {
					return "", fmt.Errorf("creating an order: %d %s %v", ans.Status, ans.Body, err)
				}
				return idOf(ans.Body)
			}
			newPayment := func(ctx context.Context) (string, error) {
				order, err := newOrder(ctx)
				if err != nil {
					return "", err
				}
				ans, err := apptest.Do(apptest.Request{Method: "POST", URL: a.URL + "/v1/orders/" + order + "/payments", APIKey: "sk_test_acme", Key: apptest.NewKey(), Body: `{"payment_method":"pm_card_visa"}`})
				if err != nil || ans.Status != 201 {
					return "", fmt.Errorf("paying an order: %d %s %v", ans.Status, ans.Body, err)
				}
				return idOf(ans.Body)
			}
			order := strings.Replace(apptest.OrderBody, `"cus_1"`, `"cus_{{unique}}"`, 1)

			endpoints := []struct {
				name string
				cfg  idemcheck.Config
			}{
				{"create an order", idemcheck.Config{
					URL:         a.URL + "/v1/orders",
					Body:        []byte(order),
					BodyVariant: []byte(strings.Replace(order, `"quantity":2`, `"quantity":3`, 1)),
					InvalidBody: []byte(strings.Replace(order, `"quantity":2`, `"quantity":0`, 1)),
					URLVariant:  a.URL + "/v1/customers",
					EffectsURL:  a.URL + "/v1/orders?customer_id=cus_{{unique}}&limit=100", EffectsPointer: "/data",
				}},
				{"add an item", idemcheck.Config{
					URL:         a.URL + "/v1/orders/{{order}}/items",
					Body:        []byte(`{"sku":"SKU-{{unique}}","name":"Tea","quantity":1,"unit_amount":300}`),
					BodyVariant: []byte(`{"sku":"SKU-{{unique}}","name":"Tea","quantity":2,"unit_amount":300}`),
					InvalidBody: []byte(`{"sku":"SKU-{{unique}}","name":"Tea","quantity":0,"unit_amount":300}`),
					EffectsURL:  a.URL + "/v1/orders/{{order}}", EffectsPointer: "/items",
					Prepare: func(ctx context.Context) (map[string]string, error) {
						id, err := newOrder(ctx)
						return map[string]string{"order": id}, err
					},
				}},
				{"create a customer", idemcheck.Config{
					URL:         a.URL + "/v1/customers",
					Body:        []byte(`{"email":"ada-{{unique}}@example.com","name":"Ada Lovelace"}`),
					BodyVariant: []byte(`{"email":"ada-{{unique}}@example.com","name":"Ada King"}`),
					InvalidBody: []byte(`{"email":"not an email {{unique}}","name":"Ada Lovelace"}`),
					URLVariant:  a.URL + "/v1/orders",
				}},
				{"pay an order", idemcheck.Config{
					URL:         a.URL + "/v1/orders/{{order}}/payments",
					Body:        []byte(`{"payment_method":"pm_card_visa"}`),
					BodyVariant: []byte(`{"payment_method":"pm_card_declined"}`),
					InvalidBody: []byte(`{"payment_method":"visa"}`),
					FaultBody:   []byte(`{"payment_method":"pm_fault_unavailable"}`),
					URLVariant:  a.URL + "/v1/orders/{{other}}/payments",
					EffectsURL:  a.Provider.URL + "/v1/charges?created_after=0", EffectsPointer: "/data",
					Prepare: func(ctx context.Context) (map[string]string, error) {
						id, err := newOrder(ctx)
						if err != nil {
							return nil, err
						}
						other, err := newOrder(ctx)
						return map[string]string{"order": id, "other": other}, err
					},
				}},
				{"refund a payment", idemcheck.Config{
					URL:         a.URL + "/v1/payments/{{payment}}/refunds",
					Body:        []byte(`{"amount":100}`),
					BodyVariant: []byte(`{"amount":200}`),
					InvalidBody: []byte(`{"amount":0}`),
					EffectsURL:  a.Provider.URL + "/v1/refunds?created_after=0", EffectsPointer: "/data",
					Prepare: func(ctx context.Context) (map[string]string, error) {
						id, err := newPayment(ctx)
						return map[string]string{"payment": id}, err
					},
				}},
			}
			for _, e := range endpoints {
				cfg := e.cfg
				cfg.Header, cfg.Header2 = acme, globex
				cfg.Client, cfg.AllowEffects, cfg.Pause = client, true, time.Second
				rep, err := idemcheck.Run(context.Background(), cfg)
				require.NoError(t, err, e.name)
				t.Logf("%s: %s", e.name, rep.Summary())
				var text strings.Builder
				require.NoError(t, rep.WriteText(&text, true))
				for _, r := range rep.Results {
					switch r.Verdict {
					case idemcheck.Fail, idemcheck.Error:
						t.Errorf("%s: %s is %s:\n%s", e.name, r.ID, r.Verdict, text.String())
					case idemcheck.Advice:
						t.Errorf("%s: %s gives advice, which this project's own endpoints never need:\n%s", e.name, r.ID, text.String())
					}
				}
				for _, id := range []string{idemcheck.FirstRequest, idemcheck.ReplaySame, idemcheck.ReplayEffect, idemcheck.ReuseBody, idemcheck.Concurrent, idemcheck.Credentials, idemcheck.NoBurn} {
					r, ok := rep.Result(id)
					require.True(t, ok, "%s: %s was not run", e.name, id)
					require.Equal(t, idemcheck.Pass, r.Verdict, "%s: %s\n%s", e.name, id, text.String())
				}
			}
			require.Positive(t, atomicLoad(client), "copies went through both instances")

			// The ledgers agree: every charge at the provider is one of our
			// succeeded payments, and every refund one of our refunds.
			succeeded := func(kind string) (n int) {
				for _, row := range apptest.Ledger(t, a.Provider.URL+"/v1/"+kind+"?created_after=0") {
					if row["status"] == "succeeded" {
						n++
					}
				}
				return n
			}
			require.EqualValues(t, succeeded("charges"), a.Count(t, "SELECT count(*) FROM payments WHERE status = 'succeeded'"), "one charge per succeeded payment")
			require.EqualValues(t, succeeded("refunds"), a.Count(t, "SELECT count(*) FROM refunds WHERE status = 'succeeded'"), "one refund at the provider per refund of ours")
			// And the outbox holds exactly the events of the states every
			// payment and refund ended in.
			requireEvents(t, a.DatabaseURL)
		})
	}
}

// alternate sends each request to the next of hosts in turn, as a balancer
// in front of replicas does.
type alternate struct {
	hosts []string
	n     atomic.Int64
	other atomic.Int64 // requests sent to any host but the first
}

func (t *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	i := t.n.Add(1) % int64(len(t.hosts))
	if r.URL.Host != t.hosts[0] {
		return http.DefaultTransport.RoundTrip(r) // the provider's ledger
	}
	if i != 0 {
		t.other.Add(1)
	}
	u := *r.URL
	u.Host = t.hosts[i]
	r2 := r.Clone(r.Context())
	r2.URL, r2.Host = &u, ""
	return http.DefaultTransport.RoundTrip(r2)
}

func atomicLoad(c *http.Client) int64 { return c.Transport.(*alternate).other.Load() }

func idOf(body []byte) (string, error) {
	var v struct{ ID string }
	if err := json.Unmarshal(body, &v); err != nil || v.ID == "" {
		return "", errors.Join(errors.New("no id in "+string(body)), err)
	}
	return url.PathEscape(v.ID), nil
}

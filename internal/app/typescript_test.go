package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestTypeScriptTypesAcceptRealAnswers generates TypeScript types from the
// committed document with openapi-typescript and compiles real answers of
// the API against them with tsc --strict: each body becomes an object
// literal typed as its schema, so a member the types lack (excess property),
// a required member missing, or a null where the type has none fails the
// compile. The tools come from scripts/spec (make spec-lint installs them,
// as CI does before the tests); without them the test skips, or fails under
// CI=true.
func TestTypeScriptTypesAcceptRealAnswers(t *testing.T) {
	testkit.EndToEnd(t)
	bin := testkit.RepoFile(t, "scripts/spec/node_modules/.bin")
	if _, err := os.Stat(filepath.Join(bin, "tsc")); err != nil {
		testkit.MissingService(t, "the TypeScript tools of scripts/spec (make spec-lint installs them)", err)
	}

	api := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite), apptest.WithSilentProvider(provider.Config{}))
	const acme = "sk_test_acme"
	var bodies []typedBody
	keep := func(schema string, a apptest.Answer, status int) apptest.Answer {
		t.Helper()
		require.Equal(t, status, a.Status, string(a.Body))
		bodies = append(bodies, typedBody{schema: schema, body: a.Body})
		return a
	}
	call := func(method, path, key, body string) apptest.Answer {
		return apptest.Call(t, method, api.URL+path, acme, key, body)
	}

	orderKey := "order-" + apptest.NewKey()
	order := keep("handlers.OrderResponse", call("POST", "/v1/orders", orderKey, apptest.OrderBody), 201).JSON(t)
	orderID := order["id"].(string)
	keep("handlers.OrderList", call("GET", "/v1/orders?limit=2", "", ""), 200)
	keep("handlers.OrderResponse", call("PUT", "/v1/orders/"+orderID+"/shipping-address", "",
		`{"name":"Ada","line1":"Rua Augusta, 1500","line2":"","city":"São Paulo","postal_code":"01304-001","country":"BR"}`), 200)
	keep("handlers.IdempotencyKeyResponse", call("GET", "/v1/idempotency-keys/"+orderKey, "", ""), 200)
	payment := keep("handlers.PaymentResponse", call("POST", "/v1/orders/"+orderID+"/payments", "pay-"+apptest.NewKey(), `{"payment_method":"pm_card_visa"}`), 201).JSON(t)
	keep("handlers.PaymentResponse", call("GET", "/v1/payments/"+payment["id"].(string), "", ""), 200)
	keep("handlers.RefundResponse", call("POST", "/v1/payments/"+payment["id"].(string)+"/refunds", "refund-"+apptest.NewKey(), `{"amount":500}`), 201)
	keep("handlers.CustomerResponse", call("POST", "/v1/customers", "cus-"+apptest.NewKey(),
		fmt.Sprintf(`{"email":"ada-%d@example.com","name":"Ada"}`, time.Now().UnixNano())), 201)

	other := call("POST", "/v1/orders", "order-"+apptest.NewKey(), apptest.OrderBody).JSON(t)["id"].(string)
	declined := keep("handlers.Problem402", call("POST", "/v1/orders/"+other+"/payments", "pay-"+apptest.NewKey(), `{"payment_method":"pm_card_declined"}`), 402).JSON(t)
	keep("handlers.PaymentResponse", call("GET", "/v1/payments/"+declined["payment_id"].(string), "", ""), 200)
	keep("handlers.Problem400", call("POST", "/v1/orders", "order-"+apptest.NewKey(), `{"currency":"brl","items":[]}`), 400)
	keep("handlers.Problem401", apptest.Call(t, "GET", api.URL+"/v1/orders", "sk_wrong", "", ""), 401)
	keep("handlers.Problem404", call("GET", "/v1/orders/ord_unknown", "", ""), 404)
	keep("handlers.Problem409", call("POST", "/v1/orders/"+orderID+"/payments", "pay-"+apptest.NewKey(), `{"payment_method":"pm_card_visa"}`), 409)
	keep("handlers.Problem422", call("POST", "/v1/orders", orderKey, `{"customer_id":"cus_2","currency":"BRL","items":[{"sku":"S","name":"N","quantity":1,"unit_amount":1}]}`), 422)
	keep("handlers.HealthResponse", apptest.Call(t, "GET", api.URL+"/healthz", "", "", ""), 200)
	keep("handlers.ReadinessResponse", apptest.Call(t, "GET", api.URL+"/readyz", "", "", ""), 200)

	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("import type { components } from \"./api\";\ntype S = components[\"schemas\"];\n\n")
	for i, b := range bodies {
		require.True(t, json.Valid(b.body), b.schema)
		fmt.Fprintf(&src, "export const answer%d: S[%q] = %s;\n", i, b.schema, b.body)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "answers.ts"), []byte(src.String()), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %s:\n%s\nanswers.ts:\n%s", name, strings.Join(args, " "), out, src.String())
	}
	run("openapi-typescript", testkit.RepoFile(t, "api/swagger.json"), "--output", filepath.Join(dir, "api.d.ts"))
	run("tsc", "--strict", "--exactOptionalPropertyTypes", "--noEmit", "--target", "es2022",
		"--module", "esnext", "--moduleResolution", "bundler", "answers.ts")
	t.Logf("%d real answers type-check against the generated types", len(bodies))
}

type typedBody struct {
	schema string
	body   []byte
}

package handlers

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	openapi "github.com/idemkeys/payments/api"
)

// TestRequestSchemasMatchTheDecoder: each request DTO and its schema in the
// OpenAPI document say the same of every member: the same names, required
// exactly when the decoder requires it (no validate:"optional"), nullable
// exactly when the decoder takes null (a pointer), and closed to other
// members exactly when the decoder refuses them (no openObject). The
// webhook's object schemas, which scripts/openapifix writes by hand, are
// held to their Go types the same way.
func TestRequestSchemasMatchTheDecoder(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties           map[string]map[string]any
				Required             []string
				AdditionalProperties any `json:"additionalProperties"`
			}
		}
	}
	require.NoError(t, json.Unmarshal(openapi.OpenAPI, &doc))
	for _, typ := range []reflect.Type{
		reflect.TypeFor[CreateOrderRequest](), reflect.TypeFor[OrderItem](), reflect.TypeFor[ShippingAddress](),
		reflect.TypeFor[CreateCustomerRequest](), reflect.TypeFor[PayOrderRequest](), reflect.TypeFor[RefundPaymentRequest](),
		reflect.TypeFor[ProviderEventRequest](), reflect.TypeFor[ProviderEventData](),
		reflect.TypeFor[ProviderCharge](), reflect.TypeFor[ProviderRefund](),
	} {
		name := "handlers." + typ.Name()
		t.Run(name, func(t *testing.T) {
			schema, ok := doc.Components.Schemas[name]
			require.True(t, ok, "no schema %s", name)
			var members, mustHave []string
			for _, f := range structInfoOf(typ).fields {
				member := f.name
				members = append(members, member)
				field := typ.Field(f.index)
				if f.required {
					mustHave = append(mustHave, member)
				}
				prop := schema.Properties[member]
				nullable := strings.Contains(strings.ToLower(toJSON(t, prop)), `"null"`)
				require.Equal(t, field.Type.Kind() == reflect.Pointer, nullable, "%s: null is taken exactly where the schema allows it", member)
			}
			slices.Sort(members)
			slices.Sort(mustHave)
			require.ElementsMatch(t, members, keys(schema.Properties))
			require.ElementsMatch(t, mustHave, schema.Required)
			open := structInfoOf(typ).open
			require.Equal(t, !open, schema.AdditionalProperties == false, "closed exactly when the decoder refuses unknown members")
		})
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

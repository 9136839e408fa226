package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"

	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/payments"
)

// The request side of the document: every rule the API enforces on a
// request, stated as JSON Schema from the values the validators use
// (payments/rules.go, the Max* limits, handlers.IfMatchPattern), so that the
// two cannot drift. A DTO's struct tags may state a limit too (for Go
// readers and swag); where they do, they must agree with the rule here, or
// the step fails.

// text is a text member of 0 (or min) to max characters.
func text(min, max int) object {
	o := object{"pattern": payments.PatternText, "maxLength": num(max)}
	if min > 0 {
		o["minLength"] = num(min)
	}
	return o
}

// visible is a member of visible ASCII, of min to max characters (max 0: no
// bound).
func visible(min, max int) object {
	o := object{"pattern": payments.PatternVisibleASCII}
	if min > 0 {
		o["minLength"] = num(min)
	}
	if max > 0 {
		o["maxLength"] = num(max)
	}
	return o
}

func between(min, max int64) object {
	return object{"minimum": num(min), "maximum": num(max)}
}

// int64Range is an integer the API reads into an int64 and bounds no
// further: beyond it the answer is 400 "is out of range".
var int64Range = object{"format": "int64", "minimum": num(math.MinInt64), "maximum": num(math.MaxInt64)}

func num[T ~int | ~int64](n T) json.Number { return json.Number(strconv.FormatInt(int64(n), 10)) }

func enum(values []string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}

// requestSchemas are the members of the request DTOs' schemas, with their
// rules. OrderItem and ShippingAddress are also how responses show them; a
// stored value obeys the rule it was accepted under.
func requestSchemas() map[string]map[string]object {
	return map[string]map[string]object{
		"handlers.CreateOrderRequest": {
			"customer_id": visible(1, payments.MaxCustomerIDLength),
			"currency":    {"enum": enum(payments.Currencies())},
			"items":       {"minItems": num(1), "maxItems": num(payments.MaxItems)},
			"metadata": {
				"maxProperties":        num(payments.MaxMetadataKeys),
				"propertyNames":        text(1, payments.MaxMetadataKeyLength),
				"additionalProperties": merged(object{"type": "string"}, text(0, payments.MaxMetadataValueLen)),
			},
		},
		"handlers.OrderItem": {
			"sku":         text(1, payments.MaxItemTextLength),
			"name":        text(1, payments.MaxItemTextLength),
			"quantity":    between(1, payments.MaxQuantity),
			"unit_amount": between(0, payments.MaxUnitAmount),
		},
		"handlers.ShippingAddress": {
			"name":        text(1, payments.MaxAddressTextLength),
			"line1":       text(1, payments.MaxAddressTextLength),
			"line2":       text(0, payments.MaxAddressTextLength),
			"city":        text(1, payments.MaxAddressTextLength),
			"postal_code": text(0, payments.MaxPostalCodeLength),
			"country":     {"enum": enum(payments.Countries())},
		},
		"handlers.CreateCustomerRequest": {
			"email": {"pattern": payments.PatternEmail, "maxLength": num(payments.MaxEmailLength)},
			"name":  text(1, payments.MaxCustomerNameLength),
		},
		"handlers.PayOrderRequest": {
			"payment_method": merged(visible(1, payments.MaxPaymentMethodLength), object{"pattern": payments.PatternPaymentMethod}),
		},
		"handlers.RefundPaymentRequest": {
			"amount": between(1, payments.MaxRefundAmount),
		},
		"handlers.ProviderEventRequest": {
			"id":      visible(1, 0),
			"type":    visible(1, 0),
			"created": int64Range,
		},
	}
}

// requestParameters are the rules of query and header parameters, by
// operation id and parameter name.
func requestParameters() map[string]map[string]object {
	ifMatch := object{"pattern": handlers.IfMatchPattern}
	return map[string]map[string]object{
		"listOrders": {
			"limit":          between(1, payments.MaxListLimit),
			"starting_after": visible(0, 0),
			"customer_id":    visible(0, payments.MaxCustomerIDLength),
		},
		"setShippingAddress": {"If-Match": ifMatch},
		"addOrderItem":       {"If-Match": ifMatch},
	}
}

// validationRules are the rules JSON Schema cannot state, by operation id:
// the API refuses a request that breaks one with 400 validation_failed
// naming field, though the schemas allow it. The document lists them as
// x-validation-rules, for people and for fuzzers (internal/app's spec fuzz
// test reads them), and each operation's description says them in words.
func validationRules() map[string][]object {
	duplicate := object{"in": "body", "field": "", "rule": "no object in the body has a member name twice (RFC 8259 leaves it open; the API refuses it)"}
	return map[string][]object{
		"createOrder": {
			{"in": "body", "field": "items", "rule": fmt.Sprintf("the order total, the sum of quantity × unit_amount over the items, is at least 1 and at most %d", int64(payments.MaxAmountTotal))},
			duplicate,
		},
		"addOrderItem": {
			{"in": "body", "field": "items", "rule": fmt.Sprintf("the order, with this item, has at most %d items and a total of at most %d", payments.MaxItems, int64(payments.MaxAmountTotal))},
			duplicate,
		},
		"listOrders": {
			{"in": "query", "field": "starting_after", "rule": "names one of your orders"},
		},
		"setShippingAddress":   {duplicate},
		"createCustomer":       {duplicate},
		"payOrder":             {duplicate},
		"refundPayment":        {duplicate},
		"receiveProviderEvent": {duplicate},
	}
}

// openSchemas are the request schemas that admit members they do not list:
// the provider's events (handlers' openObject types), whose sender may add
// members. Every other object is closed (closeObjects).
var openSchemas = map[string]bool{
	"handlers.ProviderEventRequest": true,
	"handlers.ProviderEventData":    true,
	"handlers.ProviderCharge":       true,
	"handlers.ProviderRefund":       true,
}

// requestConstraints writes requestSchemas and requestParameters into the
// document, and validationRules as x-validation-rules.
func requestConstraints(doc object) error {
	schemas, _ := dig(doc, "components", "schemas").(object)
	for _, name := range sortedKeys(objectMap(requestSchemas())) {
		props, _ := dig(schemas, name, "properties").(object)
		if props == nil {
			return fmt.Errorf("request schema %s is not in the document", name)
		}
		for member, rule := range requestSchemas()[name] {
			prop, _ := props[member].(object)
			if prop == nil {
				return fmt.Errorf("%s has no member %s", name, member)
			}
			if err := merge(prop, rule); err != nil {
				return fmt.Errorf("%s.%s: %w", name, member, err)
			}
		}
	}

	params, rules := requestParameters(), validationRules()
	seen := map[string]bool{}
	var err error
	forEachOperation(doc, func(_, _ string, op object) {
		id, _ := op["operationId"].(string)
		seen[id] = true
		list, _ := op["parameters"].([]any)
		for name, rule := range params[id] {
			found := false
			for _, p := range list {
				param, _ := p.(object)
				if param["name"] == name {
					schema, _ := param["schema"].(object)
					if e := merge(schema, rule); e != nil && err == nil {
						err = fmt.Errorf("%s %s: %w", id, name, e)
					}
					found = true
				}
			}
			if !found && err == nil {
				err = fmt.Errorf("operation %s has no parameter %s", id, name)
			}
		}
		if r, ok := rules[id]; ok {
			list := make([]any, len(r))
			for i, rule := range r {
				list[i] = merged(object{"code": "validation_failed"}, rule)
			}
			op["x-validation-rules"] = list
		}
	})
	if err != nil {
		return err
	}
	for id := range params {
		if !seen[id] {
			return fmt.Errorf("no operation %s in the document", id)
		}
	}
	for id := range rules {
		if !seen[id] {
			return fmt.Errorf("no operation %s in the document", id)
		}
	}
	return nil
}

// merge writes rule's keywords into schema. A keyword the schema states
// already (from a struct tag) must have the same value, except type arrays
// and nested objects, which are merged.
func merge(schema, rule object) error {
	if schema == nil {
		return errors.New("no schema")
	}
	for k, v := range rule {
		old, has := schema[k]
		switch {
		case !has:
			schema[k] = v
		case isObject(old) && isObject(v):
			if err := merge(old.(object), v.(object)); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		case !reflect.DeepEqual(normalize(old), normalize(v)):
			return fmt.Errorf("%s is %v in the annotations but %v in the rule the API applies", k, old, v)
		}
	}
	return nil
}

func isObject(v any) bool { _, ok := v.(object); return ok }

// normalize makes numbers comparable whatever their spelling.
func normalize(v any) any {
	if n, ok := v.(json.Number); ok {
		if f, err := n.Float64(); err == nil {
			return f
		}
	}
	return v
}

func merged(a, b object) object {
	out := object{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func objectMap[V any](m map[string]V) object {
	out := object{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// webhookEvent states the provider event's data.object: a charge for the
// charge.* types, a refund for refund.succeeded, with the status the type
// names (if/then, JSON Schema 2020-12), and any object for the types the
// API ignores. swag sees no annotation that names ProviderCharge and
// ProviderRefund, so their schemas are written here from the Go types'
// members (TestRequestSchemasMatchTheDecoder in internal/handlers holds the
// two together).
func webhookEvent(doc object) error {
	schemas, _ := dig(doc, "components", "schemas").(object)
	event, _ := schemas["handlers.ProviderEventRequest"].(object)
	if event == nil {
		return errors.New("no handlers.ProviderEventRequest in the document")
	}
	visibleOptional := visible(0, 0)
	schemas["handlers.ProviderCharge"] = object{
		"type":        "object",
		"description": "A charge as the provider's API returns it (the members the API reads; others may come and are ignored).",
		"properties": object{
			"id":              merged(object{"type": "string"}, visible(1, 0)),
			"object":          object{"type": "string", "const": "charge"},
			"status":          object{"type": "string", "enum": []any{"succeeded", "declined"}},
			"amount":          merged(object{"type": "integer"}, int64Range),
			"currency":        object{"type": "string", "description": "Compared with the payment's currency as it is."},
			"decline_code":    merged(object{"type": "string", "description": "Why a declined charge was declined."}, visibleOptional),
			"reference":       merged(object{"type": "string", "description": "Our payment id."}, visible(1, 0)),
			"idempotency_key": merged(object{"type": "string", "description": "The provider key the charge was made under."}, visibleOptional),
		},
		"required": []any{"amount", "currency", "id", "object", "reference", "status"},
	}
	schemas["handlers.ProviderRefund"] = object{
		"type":        "object",
		"description": "A refund as the provider's API returns it (the members the API reads; others may come and are ignored).",
		"properties": object{
			"id":              merged(object{"type": "string"}, visible(1, 0)),
			"object":          object{"type": "string", "const": "refund"},
			"status":          object{"type": "string"},
			"amount":          merged(object{"type": "integer"}, int64Range),
			"currency":        object{"type": "string", "description": "Compared with the refund's currency as it is."},
			"reference":       merged(object{"type": "string", "description": "Our refund id."}, visible(1, 0)),
			"idempotency_key": merged(object{"type": "string", "description": "The provider key the refund was made under."}, visibleOptional),
		},
		"required": []any{"amount", "currency", "id", "object", "reference", "status"},
	}
	when := func(eventType, ref, status string) object {
		return object{
			"if": object{"properties": object{"type": object{"const": eventType}}, "required": []any{"type"}},
			"then": object{"properties": object{"data": object{"properties": object{"object": object{
				"allOf": []any{object{"$ref": "#/components/schemas/" + ref}, object{"properties": object{"status": object{"const": status}}}},
			}}}}},
		}
	}
	event["allOf"] = []any{
		when("charge.succeeded", "handlers.ProviderCharge", "succeeded"),
		when("charge.declined", "handlers.ProviderCharge", "declined"),
		when("refund.succeeded", "handlers.ProviderRefund", "succeeded"),
	}
	return nil
}

// info fills what swag cannot write into info: the license's SPDX
// identifier (3.1; the LICENSE file's), and checks that the contact and the
// external documentation are there.
func info(doc object) error {
	license, _ := dig(doc, "info", "license").(object)
	if license["name"] != "MIT" {
		return fmt.Errorf("info.license.name is %v; the LICENSE file is MIT (change both together)", license["name"])
	}
	license["identifier"] = "MIT" // SPDX; 3.1 forbids url beside it
	delete(license, "url")
	if c, _ := dig(doc, "info", "contact").(object); c["url"] == nil && c["email"] == nil {
		return errors.New("info.contact has no url or email (@contact.url in cmd/api/main.go)")
	}
	if u, _ := dig(doc, "externalDocs", "url").(string); u == "" {
		return errors.New("no externalDocs url (@externalDocs.url in cmd/api/main.go)")
	}
	return nil
}

// markup finds text that Swagger UI would read as HTML: descriptions are
// CommonMark, where <key> is a tag and vanishes. Such text belongs in a code
// span (`Bearer <key>`). It is a check, not a rewrite: the fix is in the
// annotation.
var markup = regexp.MustCompile("<[A-Za-z/!?][^>]*>")

func plainDescriptions(doc object) error {
	var err error
	walk(doc, func(o object) {
		for _, k := range []string{"description", "summary"} {
			s, _ := o[k].(string)
			if err == nil && markup.MatchString(stripCodeSpans(s)) {
				err = fmt.Errorf("%s %q would lose %q to HTML in Swagger UI: put it in backquotes", k, s, markup.FindString(stripCodeSpans(s)))
			}
		}
	})
	return err
}

var codeSpan = regexp.MustCompile("`[^`]*`")

func stripCodeSpans(s string) string { return codeSpan.ReplaceAllString(s, "") }

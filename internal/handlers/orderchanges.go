package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
)

// ShippingAddress is the body of PUT /v1/orders/{id}/shipping-address, and
// how an order shows its address. The PUT sends the whole address: a field
// left out is empty afterwards, not kept from before.
type ShippingAddress struct {
	// Name is who receives the parcel (1-255 characters).
	Name string `json:"name" validate:"required" minLength:"1" maxLength:"255" example:"Ada Lovelace"`
	// Line1 is the street and number (1-255 characters).
	Line1 string `json:"line1" validate:"required" minLength:"1" maxLength:"255" example:"Rua Augusta, 1500"`
	// Line2 is the rest (apartment, floor), or empty (at most 255 characters).
	Line2 string `json:"line2" validate:"optional" maxLength:"255" example:"Apto 42"`
	// City is 1-255 characters.
	City string `json:"city" validate:"required" minLength:"1" maxLength:"255" example:"São Paulo"`
	// PostalCode is empty where the country has none (at most 20 characters).
	PostalCode string `json:"postal_code" validate:"optional" maxLength:"20" example:"01304-001"`
	// Country is an ISO 3166-1 alpha-2 code in upper case.
	Country string `json:"country" validate:"required" minLength:"2" maxLength:"2" example:"BR"`
}

// putShippingAddress godoc
//
//	@Summary		Set an order's shipping address
//	@Description	Desired state: the body is the whole address the order should have. Repeating the request leaves the same state, so it needs no Idempotency-Key (one sent is ignored). An address equal to the stored one changes nothing, not even the version or the ETag.
//	@Description	With If-Match, the address is set only if the order is still at that version; otherwise the answer is 412 version_mismatch and nothing changes. Without If-Match it applies to the latest version, still atomically.
//	@Description	The address may change until the order is paid (a payment in flight does not stop it: the amount does not depend on it). Once the order is paid, only the address it already has is accepted, as a no-op; any other is 409 order_already_paid.
//	@ID				setShippingAddress
//	@Tags			orders
//	@Accept			json
//	@Security		BearerAuth
//	@Param			id			path	string			true	"Order id"	example(ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Param			If-Match	header	string			false	"The ETag of the order as last read (e.g. the number 3 in double quotes); * or absent: any version"
//	@Param			address		body	ShippingAddress	true	"The whole address"
//	@Produce		json
//	@Success		200	{object}	OrderResponse
//	@Header			200	{string}	ETag	"The order's version after the request, as a strong entity tag"
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"validation_failed (the body, or a malformed If-Match), or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		404	{object}	Problem404	"not_found"
//	@Failure		408	{object}	Problem408	"request_timeout: the body did not arrive in time; nothing was done"
//	@Failure		409	{object}	Problem409	"order_already_paid"
//	@Failure		412	{object}	Problem412	"version_mismatch: the order changed since the If-Match version; nothing was changed"
//	@Failure		413	{object}	Problem413	"request_too_large: the body is over MAX_BODY_BYTES"
//	@Failure		415	{object}	Problem415	"unsupported_media_type: the body's Content-Type is missing or not application/json; nothing was done or stored"
//	@Failure		500	{object}	Problem500	"internal_error: nothing was stored; the same request may be sent again"
//	@Failure		503	{object}	Problem503	"service_unavailable: the database cannot be reached; nothing was done"
//	@Failure		429	{object}	Problem429	"too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all with none of them idle (with Retry-After)"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Produce		json
//	@Router			/v1/orders/{id}/shipping-address [put]
func (h *orderHandlers) putShippingAddress(c *gin.Context) (idempotency.Answer, error) {
	var req ShippingAddress
	return changeOrder(c, &req, http.StatusOK, func(ctx context.Context, merchantID, id string, pre payments.Precondition) (payments.Order, error) {
		return h.orders.SetShippingAddress(ctx, merchantID, id, toDomainAddress(req), pre)
	})
}

// addOrderItem godoc
//
//	@Summary		Add an item to an order
//	@Description	Adds one line to the order and recomputes amount_total. Cumulative: the same body sent twice adds two lines, so unlike the shipping address this needs an Idempotency-Key. A retry with the same key and body replays the first answer byte for byte (with Idempotent-Replayed: true) and adds nothing more; the key's fingerprint covers the path and the body, not If-Match, so a retry that refreshed its If-Match is still the same operation.
//	@Description	With If-Match, the item is added only if the order is still at that version; otherwise 412 version_mismatch, nothing changes, and the key may be used again for this same item once the client has decided again.
//	@Description	Refused with 409 order_already_paid when the order is paid or has a payment pending or processing: a payment takes the total when it starts.
//	@ID				addOrderItem
//	@Tags			orders
//	@Accept			json
//	@Security		BearerAuth
//	@Param			id				path	string		true	"Order id"	example(ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Param			Idempotency-Key	header		string	true	"Unique key of this operation, reused on every retry of it: 1-255 visible ASCII characters (0x21-0x7E)"	minlength(1)	maxlength(255)
//	@Param			If-Match		header	string		false	"The ETag of the order as last read (e.g. the number 3 in double quotes); * or absent: any version"
//	@Param			item			body	OrderItem	true	"The item"
//	@Produce		json
//	@Success		201	{object}	OrderResponse
//	@Header			201	{string}	ETag	"The order's version after the request, as a strong entity tag; a replay carries the first answer's"
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"validation_failed (the item, an order that would exceed 100 items or the total limit, a malformed If-Match), idempotency_key_missing or idempotency_key_invalid, or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		404	{object}	Problem404	"not_found"
//	@Failure		408	{object}	Problem408	"request_timeout: the body did not arrive in time; nothing was done"
//	@Failure		409	{object}	Problem409	"order_already_paid (the order is paid; stored and replayed), payment_in_progress (a payment of the order is in flight; with Retry-After; not stored), idempotency_request_in_progress (with Retry-After), or idempotency_key_expired (IDEMPOTENCY_TOMBSTONES=true only)"
//	@Failure		412	{object}	Problem412	"version_mismatch: the order changed since the If-Match version; nothing was changed"
//	@Failure		413	{object}	Problem413	"request_too_large: the body is over MAX_BODY_BYTES"
//	@Failure		415	{object}	Problem415	"unsupported_media_type: the body's Content-Type is missing or not application/json; nothing was done or stored"
//	@Failure		422	{object}	Problem422	"idempotency_key_reused: the key was used before for a different request"
//	@Failure		429	{object}	Problem429	"rate_limited: more than RATE_LIMIT_NEW_KEYS new keys from this merchant in RATE_LIMIT_WINDOW (100 a second by default; 0 turns the limit off); retries of known keys are never limited, or too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all"
//	@Failure		500	{object}	Problem500	"internal_error: nothing was stored; the same request may be sent again"
//	@Failure		503	{object}	Problem503	"service_unavailable: the database cannot be reached; nothing was done"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			409,429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Header			201,409	{string}	Idempotent-Replayed	"true: this answer replays the stored answer of an earlier request with this key"
//	@Produce		json
//	@Router			/v1/orders/{id}/items [post]
func (h *orderHandlers) addOrderItem(c *gin.Context) (idempotency.Answer, error) {
	var req OrderItem
	// The request context carries the idempotency layer's transaction: the
	// item commits with the idempotency record, or not at all.
	return changeOrder(c, &req, http.StatusCreated, func(ctx context.Context, merchantID, id string, pre payments.Precondition) (payments.Order, error) {
		return h.orders.AddOrderItem(ctx, merchantID, id, toDomainItem(req), pre)
	})
}

// changeOrder is the shape both order writes share: decode the body into
// req, read If-Match, apply the change, and answer the order with its new
// ETag.
func changeOrder(c *gin.Context, req any, status int, apply func(ctx context.Context, merchantID, id string, pre payments.Precondition) (payments.Order, error)) (idempotency.Answer, error) {
	if err := decodeJSON(c, req); err != nil {
		return idempotency.Answer{}, err
	}
	pre, err := toPrecondition(c.Request.Header)
	if err != nil {
		return idempotency.Answer{}, err
	}
	o, err := apply(c.Request.Context(), MerchantID(c), c.Param("id"), pre)
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.JSON(status, toOrderResponse(o), "ETag", etag(o.Version)), nil
}

// etag is the strong entity tag of an order version: the number in double
// quotes (RFC 9110 §8.8.3). The version changes with every change to the
// order and only then, which is what a strong validator promises.
func etag(version int64) string {
	return `"` + strconv.FormatInt(version, 10) + `"`
}

// errIfMatch refuses an If-Match header that is not "*" or a list of entity
// tags. Ignoring it would drop the client's safety check without a word.
var errIfMatch = &requestError{fields: []problem.FieldError{{
	Field: "If-Match", Message: `must be * or a list of entity tags such as "3"`,
}}}

// toPrecondition reads If-Match (RFC 9110 §13.1.1) into the domain's
// Precondition. Absent or "*" asks nothing. Otherwise it is a list of entity
// tags, compared strongly: a weak tag (W/"3") never matches, and neither
// does a tag that is not one of our versions; a list with no tag that can
// match makes a precondition nothing meets, so the answer is 412, as the RFC
// asks.
func toPrecondition(h http.Header) (payments.Precondition, error) {
	values := h.Values("If-Match")
	if len(values) == 0 {
		return payments.Precondition{}, nil
	}
	rest := strings.Join(values, ",")
	if strings.TrimSpace(rest) == "*" {
		return payments.Precondition{}, nil
	}
	pre := payments.Precondition{Required: true}
	for {
		rest = strings.TrimLeft(rest, " \t,")
		if rest == "" {
			return pre, nil
		}
		weak := strings.HasPrefix(rest, "W/")
		if weak {
			rest = rest[2:]
		}
		if !strings.HasPrefix(rest, `"`) {
			return payments.Precondition{}, errIfMatch
		}
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return payments.Precondition{}, errIfMatch
		}
		tag := rest[1 : 1+end]
		rest = strings.TrimLeft(rest[end+2:], " \t")
		if (rest != "" && rest[0] != ',') || !validOpaqueTag(tag) {
			return payments.Precondition{}, errIfMatch
		}
		if weak {
			continue
		}
		if v, err := strconv.ParseInt(tag, 10, 64); err == nil && v > 0 && etag(v) == `"`+tag+`"` {
			pre.Versions = append(pre.Versions, v)
		}
	}
}

// validOpaqueTag reports whether s is made of etagc characters: visible
// ASCII except the double quote, or bytes from 0x80 (RFC 9110 §8.8.3).
func validOpaqueTag(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x21 || b == '"' || b == 0x7f {
			return false
		}
	}
	return true
}

func toDomainAddress(a ShippingAddress) payments.ShippingAddress {
	return payments.ShippingAddress{
		Name: a.Name, Line1: a.Line1, Line2: a.Line2, City: a.City, PostalCode: a.PostalCode, Country: a.Country,
	}
}

func toShippingAddressResponse(a *payments.ShippingAddress) *ShippingAddress {
	if a == nil {
		return nil
	}
	return &ShippingAddress{
		Name: a.Name, Line1: a.Line1, Line2: a.Line2, City: a.City, PostalCode: a.PostalCode, Country: a.Country,
	}
}

func toDomainItem(it OrderItem) payments.Item {
	return payments.Item{SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitAmount: it.UnitAmount}
}

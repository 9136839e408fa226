package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
)

// OrderService runs the order use cases (payments.Service).
type OrderService interface {
	// CreateOrder stores a new order in the transaction carried by ctx, if
	// any. It returns a *payments.ValidationError or an error wrapping
	// database.ErrUnavailable.
	CreateOrder(ctx context.Context, merchantID string, in payments.NewOrderInput) (payments.Order, error)
	// GetOrder returns an error wrapping payments.ErrNotFound or
	// database.ErrUnavailable.
	GetOrder(ctx context.Context, merchantID, id string) (payments.Order, error)
	// ListOrders returns a page, newest first, and whether more follow. It
	// returns a *payments.ValidationError or an error wrapping
	// database.ErrUnavailable.
	ListOrders(ctx context.Context, merchantID string, q payments.ListQuery) ([]payments.Order, bool, error)
	// SetShippingAddress makes addr the order's shipping address; an
	// identical address changes nothing. It returns a
	// *payments.ValidationError or an error wrapping payments.ErrNotFound,
	// payments.ErrVersionMismatch, payments.ErrOrderAlreadyPaid or
	// database.ErrUnavailable.
	SetShippingAddress(ctx context.Context, merchantID, id string, addr payments.ShippingAddress, pre payments.Precondition) (payments.Order, error)
	// AddOrderItem appends item to the order, in the transaction carried by
	// ctx, if any. Errors as for SetShippingAddress.
	AddOrderItem(ctx context.Context, merchantID, id string, item payments.Item, pre payments.Precondition) (payments.Order, error)
}

// The DTOs below are the wire format. Their struct tags document the rules
// for Swagger only; the rules themselves live (and are enforced) in the
// payments package.

// CreateOrderRequest is the body of POST /v1/orders.
type CreateOrderRequest struct {
	// CustomerID is the merchant's own id of the customer (1-255 visible ASCII characters).
	CustomerID string `json:"customer_id" validate:"required" minLength:"1" maxLength:"255" example:"cus_1"`
	// Currency is an active ISO 4217 code with a minor unit, in upper case
	// (the document's enum lists them all).
	Currency string `json:"currency" validate:"required" example:"BRL"`
	// Items are the order's lines, 1 to 100.
	Items []OrderItem `json:"items" validate:"required" minItems:"1" maxItems:"100"`
	// Metadata is free-form: at most 50 keys of up to 40 characters, values up to 500.
	Metadata map[string]string `json:"metadata,omitempty" validate:"optional" maxProperties:"50"`
}

// OrderItem is one line of an order, in requests and responses alike.
type OrderItem struct {
	// SKU is the merchant's product code (1-255 characters).
	SKU string `json:"sku" validate:"required" minLength:"1" maxLength:"255" example:"SKU-1"`
	// Name is shown to the customer (1-255 characters).
	Name string `json:"name" validate:"required" minLength:"1" maxLength:"255" example:"Coffee"`
	// Quantity is 1 to 10000.
	Quantity int64 `json:"quantity" validate:"required" minimum:"1" maximum:"10000" example:"2"`
	// UnitAmount is the price of one unit in the currency's minor unit, 0 to 10^12.
	UnitAmount int64 `json:"unit_amount" minimum:"0" maximum:"1000000000000" example:"1250"`
}

// OrderResponse is an order as the API shows it.
type OrderResponse struct {
	ID         string      `json:"id" example:"ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	Object     string      `json:"object" enums:"order" example:"order"`
	CustomerID string      `json:"customer_id" example:"cus_1"`
	Currency   string      `json:"currency" example:"BRL"`
	Items      []OrderItem `json:"items"`
	// AmountTotal is the sum of quantity × unit_amount, in minor units.
	AmountTotal int64             `json:"amount_total" example:"2500"`
	Status      string            `json:"status" enums:"pending_payment,paid" example:"pending_payment"`
	Metadata    map[string]string `json:"metadata"`
	// ShippingAddress is null until PUT /v1/orders/{id}/shipping-address
	// sets it.
	ShippingAddress *ShippingAddress `json:"shipping_address" extensions:"x-nullable"`
	// Version counts the order's changes; the ETag header of a GET or of a
	// write (and of its replays) carries it too, quoted.
	Version int64 `json:"version" example:"1"`
	// CreatedAt is RFC 3339 in UTC.
	CreatedAt time.Time `json:"created_at" format:"date-time" example:"2025-06-01T12:00:00.123456Z"`
}

// OrderList is one page of orders, newest first.
type OrderList struct {
	Object string          `json:"object" enums:"list" example:"list"`
	Data   []OrderResponse `json:"data"`
	// HasMore says whether older orders follow; ask for them with
	// starting_after set to the id of the last order of this page.
	HasMore bool `json:"has_more" example:"false"`
}

// orderHandlers serves the /v1/orders routes.
type orderHandlers struct {
	orders OrderService
}

// createOrder godoc
//
//	@Summary		Create an order
//	@Description	Creates an order pending payment. Idempotent: a retry with the same Idempotency-Key and body replays the first answer byte for byte (with Idempotent-Replayed: true) and creates nothing more.
//	@Description	Beyond its schema, the body must make an order total (the sum of quantity × unit_amount) of at least 1 and at most 10^15, and hold no member name twice; these rules are listed in x-validation-rules, and breaking one is 400 validation_failed.
//	@ID				createOrder
//	@Tags			orders
//	@Accept			json
//	@Security		BearerAuth
//	@Param			Idempotency-Key	header		string	true	"Unique key of this operation, reused on every retry of it: 1-255 visible ASCII characters (0x21-0x7E)"	minlength(1)	maxlength(255)
//	@Param			order			body		CreateOrderRequest	true	"The order"
//	@Produce		json
//	@Success		201	{object}	OrderResponse
//	@Header			201	{string}	Location	"/v1/orders/{id}"
//	@Header			201	{string}	ETag		"The order's version as a strong entity tag; a replay carries the first answer's"
//	@Header			201	{string}	Idempotent-Replayed	"true: this answer replays the stored answer of an earlier request with this key"
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"validation_failed (also a total of 0, or bidirectional controls or zero-width spaces in a text field), idempotency_key_missing or idempotency_key_invalid, or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		408	{object}	Problem408	"request_timeout: the body did not arrive in time; nothing was done"
//	@Failure		409	{object}	Problem409	"idempotency_request_in_progress (with Retry-After), or idempotency_key_expired (IDEMPOTENCY_TOMBSTONES=true only)"
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
//	@Produce		json
//	@Router			/v1/orders [post]
func (h *orderHandlers) createOrder(c *gin.Context) (idempotency.Answer, error) {
	var req CreateOrderRequest
	if err := decodeJSON(c, &req); err != nil {
		return idempotency.Answer{}, err
	}
	// The request context carries the idempotency layer's transaction: the
	// order commits with the idempotency record, or not at all.
	o, err := h.orders.CreateOrder(c.Request.Context(), MerchantID(c), toNewOrderInput(req))
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.JSON(http.StatusCreated, toOrderResponse(o), "Location", "/v1/orders/"+o.ID, "ETag", etag(o.Version)), nil
}

// getOrder godoc
//
//	@Summary		Get an order
//	@Description	Returns one of the merchant's orders. Another merchant's order is not found.
//	@ID				getOrder
//	@Tags			orders
//	@Security		BearerAuth
//	@Param			id	path	string	true	"Order id"	example(ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Produce		json
//	@Success		200	{object}	OrderResponse
//	@Header			200	{string}	ETag	"The order's version as a strong entity tag (the number in double quotes). Send it back in If-Match to change the order only if nobody changed it since."
//	@Produce		application/problem+json
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		404	{object}	Problem404	"not_found"
//	@Failure		500	{object}	Problem500	"internal_error: nothing was stored; the same request may be sent again"
//	@Failure		503	{object}	Problem503	"service_unavailable: the database cannot be reached; nothing was done"
//	@Failure		400	{object}	Problem400	"malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		429	{object}	Problem429	"too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all with none of them idle (with Retry-After)"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Produce		json
//	@Router			/v1/orders/{id} [get]
func (h *orderHandlers) getOrder(c *gin.Context) (idempotency.Answer, error) {
	o, err := h.orders.GetOrder(c.Request.Context(), MerchantID(c), c.Param("id"))
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.JSON(http.StatusOK, toOrderResponse(o), "ETag", etag(o.Version)), nil
}

// listOrders godoc
//
//	@Summary		List orders
//	@Description	Returns the merchant's orders, newest first, one page at a time. Pass the id of the last order of a page as starting_after to get the next one: it must name one of your orders (400 validation_failed otherwise; listed in x-validation-rules).
//	@ID				listOrders
//	@Tags			orders
//	@Security		BearerAuth
//	@Param			limit			query	int		false	"Page size, 1 to 100"	minimum(1)	maximum(100)	default(10)
//	@Param			starting_after	query	string	false	"Id of the last order of the previous page"
//	@Param			customer_id		query	string	false	"Only this customer's orders"
//	@Produce		json
//	@Success		200	{object}	OrderList
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"validation_failed: a limit out of range, an unknown starting_after, or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
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
//	@Router			/v1/orders [get]
func (h *orderHandlers) listOrders(c *gin.Context) (idempotency.Answer, error) {
	q, err := toListQuery(c)
	if err != nil {
		return idempotency.Answer{}, err
	}
	orders, hasMore, err := h.orders.ListOrders(c.Request.Context(), MerchantID(c), q)
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.JSON(http.StatusOK, toOrderList(orders, hasMore)), nil
}

func toNewOrderInput(req CreateOrderRequest) payments.NewOrderInput {
	items := make([]payments.Item, len(req.Items))
	for i, it := range req.Items {
		items[i] = payments.Item{SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitAmount: it.UnitAmount}
	}
	return payments.NewOrderInput{
		CustomerID: req.CustomerID,
		Currency:   req.Currency,
		Items:      items,
		Metadata:   req.Metadata,
	}
}

// toListQuery reads the query string. It only checks that limit is a
// positive integer: zero means "default" to the domain, so an explicit
// limit=0 must be refused here; the upper bound is the domain's.
func toListQuery(c *gin.Context) (payments.ListQuery, error) {
	q := payments.ListQuery{
		StartingAfter: c.Query("starting_after"),
		CustomerID:    c.Query("customer_id"),
	}
	if raw, ok := c.GetQuery("limit"); ok {
		n, err := queryInteger(raw) // bind.go: the integer rule of bodies
		if err != nil || n < 1 {
			return q, &requestError{fields: []problem.FieldError{{
				Field: "limit", Message: "must be an integer between 1 and " + strconv.Itoa(payments.MaxListLimit),
			}}}
		}
		q.Limit = int(n)
	}
	return q, nil
}

func toOrderResponse(o payments.Order) OrderResponse {
	items := make([]OrderItem, len(o.Items))
	for i, it := range o.Items {
		items[i] = OrderItem{SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitAmount: it.UnitAmount}
	}
	metadata := o.Metadata
	if metadata == nil {
		metadata = map[string]string{} // always an object on the wire, never null
	}
	return OrderResponse{
		ID:              o.ID,
		Object:          "order",
		CustomerID:      o.CustomerID,
		Currency:        o.Currency,
		Items:           items,
		AmountTotal:     o.AmountTotal,
		Status:          string(o.Status),
		Metadata:        metadata,
		ShippingAddress: toShippingAddressResponse(o.ShippingAddress),
		Version:         o.Version,
		CreatedAt:       o.CreatedAt.UTC(),
	}
}

func toOrderList(orders []payments.Order, hasMore bool) OrderList {
	data := make([]OrderResponse, len(orders))
	for i, o := range orders {
		data[i] = toOrderResponse(o)
	}
	return OrderList{Object: "list", Data: data, HasMore: hasMore}
}

package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
)

// CustomerService runs the customer use cases (payments.Service).
type CustomerService interface {
	// CreateCustomer stores a new customer in the transaction carried by
	// ctx, if any. It returns a *payments.ValidationError or an error
	// wrapping payments.ErrCustomerExists or database.ErrUnavailable.
	CreateCustomer(ctx context.Context, merchantID string, in payments.NewCustomerInput) (payments.Customer, error)
	// GetCustomer returns an error wrapping payments.ErrNotFound or
	// database.ErrUnavailable.
	GetCustomer(ctx context.Context, merchantID, id string) (payments.Customer, error)
}

// CreateCustomerRequest is the body of POST /v1/customers.
type CreateCustomerRequest struct {
	// Email identifies the customer within the merchant: one customer per
	// email, compared case-insensitively (at most 254 characters, as sent:
	// no spaces around it).
	Email string `json:"email" validate:"required" minLength:"3" maxLength:"254" example:"ada@example.com"`
	// Name is shown to the merchant (1-255 characters).
	Name string `json:"name" validate:"required" minLength:"1" maxLength:"255" example:"Ada Lovelace"`
}

// CustomerResponse is a customer as the API shows it.
type CustomerResponse struct {
	ID     string `json:"id" validate:"required" example:"cus_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	Object string `json:"object" validate:"required" enums:"customer" example:"customer"`
	// Email is as stored: in lower case.
	Email string `json:"email" validate:"required" example:"ada@example.com"`
	Name  string `json:"name" validate:"required" example:"Ada Lovelace"`
	// CreatedAt is RFC 3339 in UTC.
	CreatedAt time.Time `json:"created_at" validate:"required" format:"date-time" example:"2025-06-01T12:00:00.123456Z"`
}

// customerHandlers serves the /v1/customers routes.
type customerHandlers struct {
	customers CustomerService
}

// createCustomer godoc
//
//	@Summary		Create a customer
//	@Description	Creates a customer. One customer per email per merchant: another Idempotency-Key with an email already taken (compared case-insensitively) is 409 customer_exists, an answer that is stored and replayed like a success. Idempotent: a retry with the same Idempotency-Key and body replays the first answer byte for byte (with Idempotent-Replayed: true).
//	@ID				createCustomer
//	@Tags			customers
//	@Accept			json
//	@Security		BearerAuth
//	@Param			Idempotency-Key	header		string	true	"Unique key of this operation, reused on every retry of it: 1-255 visible ASCII characters (0x21-0x7E)"	minlength(1)	maxlength(255)
//	@Param			customer		body	CreateCustomerRequest	true	"The customer"
//	@Produce		json
//	@Success		201	{object}	CustomerResponse
//	@Header			201	{string}	Location	"/v1/customers/{id}"
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"validation_failed, idempotency_key_missing or idempotency_key_invalid, or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		408	{object}	Problem408	"request_timeout: the body did not arrive in time; nothing was done"
//	@Failure		409	{object}	Problem409	"customer_exists (stored and replayed), idempotency_request_in_progress (with Retry-After), or idempotency_key_expired (IDEMPOTENCY_TOMBSTONES=true only)"
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
//	@Router			/v1/customers [post]
func (h *customerHandlers) createCustomer(c *gin.Context) (idempotency.Answer, error) {
	var req CreateCustomerRequest
	if err := decodeJSON(c, &req); err != nil {
		return idempotency.Answer{}, err
	}
	// The request context carries the idempotency layer's transaction: the
	// customer commits with the idempotency record, or not at all.
	cu, err := h.customers.CreateCustomer(c.Request.Context(), MerchantID(c), payments.NewCustomerInput{Email: req.Email, Name: req.Name})
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.JSON(http.StatusCreated, toCustomerResponse(cu), "Location", "/v1/customers/"+cu.ID), nil
}

// getCustomer godoc
//
//	@Summary		Get a customer
//	@Description	Returns one of the merchant's customers. Another merchant's customer is not found.
//	@ID				getCustomer
//	@Tags			customers
//	@Security		BearerAuth
//	@Param			id	path	string	true	"Customer id"	example(cus_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Produce		json
//	@Success		200	{object}	CustomerResponse
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
//	@Router			/v1/customers/{id} [get]
func (h *customerHandlers) getCustomer(c *gin.Context) (idempotency.Answer, error) {
	cu, err := h.customers.GetCustomer(c.Request.Context(), MerchantID(c), c.Param("id"))
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.JSON(http.StatusOK, toCustomerResponse(cu)), nil
}

func toCustomerResponse(c payments.Customer) CustomerResponse {
	return CustomerResponse{ID: c.ID, Object: "customer", Email: c.Email, Name: c.Name, CreatedAt: c.CreatedAt.UTC()}
}

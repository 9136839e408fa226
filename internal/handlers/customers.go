package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

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
	// email, compared case-insensitively (at most 254 characters).
	Email string `json:"email" validate:"required" minLength:"3" maxLength:"254" example:"ada@example.com"`
	// Name is shown to the merchant (1-255 characters).
	Name string `json:"name" validate:"required" minLength:"1" maxLength:"255" example:"Ada Lovelace"`
}

// CustomerResponse is a customer as the API shows it.
type CustomerResponse struct {
	ID     string `json:"id" validate:"required" example:"cus_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	Object string `json:"object" validate:"required" enums:"customer" example:"customer"`
	// Email is as stored: trimmed and in lower case.
	Email string `json:"email" validate:"required" example:"ada@example.com"`
	Name  string `json:"name" validate:"required" example:"Ada Lovelace"`
	// CreatedAt is RFC 3339 in UTC.
	CreatedAt time.Time `json:"created_at" validate:"required" example:"2025-06-01T12:00:00.123456Z"`
}

// customerHandlers serves the /v1/customers routes.
type customerHandlers struct {
	customers CustomerService
}

// createCustomer godoc
//
//	@Summary		Create a customer
//	@Description	Creates a customer. One customer per email per merchant: another Idempotency-Key with an email already taken (compared case-insensitively) is 409 customer_exists, an answer that is stored and replayed like a success. Idempotent: a retry with the same Idempotency-Key and body replays the first answer byte for byte (with Idempotent-Replayed: true).
//	@Tags			customers
//	@Accept			json
//	@Produce		json,application/problem+json
//	@Security		ApiKeyAuth
//	@Param			Idempotency-Key	header		string					true	"Unique key of this operation, reused on every retry of it (1-255 visible ASCII characters)"	minlength(1)	maxlength(255)
//	@Param			customer		body		CreateCustomerRequest	true	"The customer"
//	@Success		201				{object}	CustomerResponse
//	@Header			201				{string}	Location			"/v1/customers/{id}"
//	@Header			201				{string}	Idempotent-Replayed	"true when this answer replays a stored one"
//	@Failure		400				{object}	problem.Problem		"validation_failed, idempotency_key_missing or idempotency_key_invalid"
//	@Failure		401				{object}	problem.Problem		"unauthorized"
//	@Failure		409				{object}	problem.Problem		"customer_exists (stored and replayed), or idempotency_request_in_progress (with Retry-After)"
//	@Failure		413				{object}	problem.Problem		"request_too_large"
//	@Failure		422				{object}	problem.Problem		"idempotency_key_reused"
//	@Failure		429				{object}	problem.Problem		"rate_limited (with Retry-After)"
//	@Failure		500				{object}	problem.Problem		"internal_error"
//	@Failure		503				{object}	problem.Problem		"service_unavailable (with Retry-After)"
//	@Header			409,429,503		{integer}	Retry-After			"seconds to wait before retrying"
//	@Router			/v1/customers [post]
func (h *customerHandlers) createCustomer(c *gin.Context) {
	var req CreateCustomerRequest
	if err := decodeJSON(c, &req); err != nil {
		RenderError(c, err)
		return
	}
	// The request context carries the idempotency layer's transaction: the
	// customer commits with the idempotency record, or not at all.
	cu, err := h.customers.CreateCustomer(c.Request.Context(), MerchantID(c), payments.NewCustomerInput{Email: req.Email, Name: req.Name})
	if err != nil {
		RenderError(c, err)
		return
	}
	c.Header("Location", "/v1/customers/"+cu.ID)
	c.JSON(http.StatusCreated, toCustomerResponse(cu))
}

// getCustomer godoc
//
//	@Summary		Get a customer
//	@Description	Returns one of the merchant's customers. Another merchant's customer is not found.
//	@Tags			customers
//	@Produce		json,application/problem+json
//	@Security		ApiKeyAuth
//	@Param			id	path		string	true	"Customer id"	example(cus_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Success		200	{object}	CustomerResponse
//	@Failure		401	{object}	problem.Problem	"unauthorized"
//	@Failure		404	{object}	problem.Problem	"not_found"
//	@Failure		500	{object}	problem.Problem	"internal_error"
//	@Failure		503	{object}	problem.Problem	"service_unavailable (with Retry-After)"
//	@Header			503	{integer}	Retry-After		"seconds to wait before retrying"
//	@Router			/v1/customers/{id} [get]
func (h *customerHandlers) getCustomer(c *gin.Context) {
	cu, err := h.customers.GetCustomer(c.Request.Context(), MerchantID(c), c.Param("id"))
	if err != nil {
		RenderError(c, err)
		return
	}
	c.JSON(http.StatusOK, toCustomerResponse(cu))
}

func toCustomerResponse(c payments.Customer) CustomerResponse {
	return CustomerResponse{ID: c.ID, Object: "customer", Email: c.Email, Name: c.Name, CreatedAt: c.CreatedAt.UTC()}
}

// Package handlers is the HTTP layer of the API: the Gin router, the
// middleware every request crosses, the request and response DTOs with the
// converters that cross into the domain (but a payment's and a refund's
// answers, which package answers builds inside a request and outside one),
// the swag annotations, and the one table (errors.go) that turns an error
// into its problem+json answer.
//
// A request to POST /v1/orders reads top to bottom as:
//
//	requestContext  request id, structured logger, access log
//	recovery        a panic becomes a 500 problem, never a dropped connection
//	authenticate    Authorization: Bearer <key> → merchant id, or 401 first of all
//	limitBody       Content-Length or the body itself over MaxBodyBytes → 413
//	idempotency     Deps.IdempotentAtomic: key, fingerprint, replay, and the
//	                transaction the handler's work commits in
//	createOrder     decode → toNewOrderInput → payments.Service → toOrderResponse
//
// Handlers never see a transaction: the idempotency middleware puts it in
// the request's context and the handler passes c.Request.Context() on. On an
// error a handler calls RenderError and returns; it never picks a status
// itself.
package handlers

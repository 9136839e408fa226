// Package paymentsdb is the payments domain's store on PostgreSQL or
// SQLite through GORM: orders, customers, payments, refunds, orphans, the
// webhook inbox and the outbox. Its row types stay here; the Service
// (package payments) sees only domain types, through the store interfaces
// it declares where it consumes them. Every method starts from
// dbtx.Conn, so it joins the transaction the context carries, and
// passes errors through database.Classify.
package paymentsdb

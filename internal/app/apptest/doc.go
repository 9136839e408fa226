// Package apptest is how tests talk to the payments API: one family of
// request helpers (Call, Send and Do, with Request and Answer) for every
// request a test sends, SendRaw for bytes an http.Client refuses to send,
// and Ledger for the mock provider's record of what it charged.
package apptest

// Package apptest runs the payments API for tests and talks to it, so that
// every API test starts the program one way and sends requests one way.
//
// Start serves the program in-process through app.New and Serve, as cmd/api
// does, on a free loopback port, with the mock provider beside it when asked
// (WithProvider, WithSilentProvider) and options for app.New (WithApp).
// StartBinary runs the built cmd/api (Binaries) as a process, for tests that
// kill or signal it. Both start from the same defaults; Env adds settings.
//
// Requests go through one family: Call, Send and Do (one Request, one
// Answer), SendRaw for bytes an http.Client refuses to send, and Ledger for
// the mock provider's record of what it charged.
package apptest

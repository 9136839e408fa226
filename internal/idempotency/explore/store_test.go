package explore_test

import (
	"testing"

	"github.com/idemkeys/payments/internal/idempotency/explore"
	"github.com/idemkeys/payments/internal/idempotency/storetest"
)

// TestStoreContract holds the explorer's store to the contract every store
// keeps, so that what the explorer proves of the core holds on the
// product's stores too.
func TestStoreContract(t *testing.T) {
	s := explore.NewStore()
	storetest.Run(t, storetest.Subject{Store: s, Tx: s})
}

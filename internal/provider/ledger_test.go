package provider_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
)

// TestLedgerDump checks GET /v1/ledger: empty lists at first, then every
// charge and refund once, however often a key was replayed.
func TestLedgerDump(t *testing.T) {
	running := startProvider(t, provider.Config{})
	read := func() provider.Ledger {
		t.Helper()
		raw := doRaw(t, http.MethodGet, running.URL+"/v1/ledger", nil, nil)
		require.Equal(t, http.StatusOK, raw.status)
		var l provider.Ledger
		require.NoError(t, json.Unmarshal(raw.body, &l))
		return l
	}
	empty := doRaw(t, http.MethodGet, running.URL+"/v1/ledger", nil, nil)
	require.JSONEq(t, `{"object":"ledger","charges":[],"refunds":[]}`, string(empty.body))

	for range 2 { // the second is a replay: no new charge
		raw := doRaw(t, http.MethodPost, running.URL+"/v1/charges", map[string]string{"Idempotency-Key": "k1"}, visa("pay_1"))
		require.Equal(t, http.StatusCreated, raw.status)
	}
	raw := doRaw(t, http.MethodPost, running.URL+"/v1/charges", map[string]string{"Idempotency-Key": "k2"}, visa("pay_2"))
	require.Equal(t, http.StatusCreated, raw.status)
	var charge provider.Charge
	require.NoError(t, json.Unmarshal(raw.body, &charge))
	raw = doRaw(t, http.MethodPost, running.URL+"/v1/refunds", map[string]string{"Idempotency-Key": "r1"},
		provider.RefundRequest{Charge: charge.ID, Amount: 100, Reference: "re_1"})
	require.Equal(t, http.StatusCreated, raw.status)

	l := read()
	require.Equal(t, "ledger", l.Object)
	require.Len(t, l.Charges, 2)
	require.Equal(t, "pay_1", l.Charges[0].Reference)
	require.Equal(t, "pay_2", l.Charges[1].Reference)
	require.Len(t, l.Refunds, 1)
	require.Equal(t, charge.ID, l.Refunds[0].Charge)

	post := doRaw(t, http.MethodPost, running.URL+"/v1/ledger", nil, nil)
	require.Equal(t, http.StatusMethodNotAllowed, post.status)
}

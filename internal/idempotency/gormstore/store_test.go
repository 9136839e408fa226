package gormstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/idempotency/seal"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
	"github.com/idemkeys/payments/internal/idempotency/storetest"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, seal.KeySize) }

func newCipher(t *testing.T, active string, ids ...string) *seal.Cipher {
	t.Helper()
	keys := map[string][]byte{}
	for i, id := range ids {
		keys[id] = testKey(byte(i + 1))
	}
	c, err := seal.New(keys, active)
	require.NoError(t, err)
	return c
}

const ttl = 24 * time.Hour

func executing(scope, key string, now time.Time) *idempotency.Record {
	return &idempotency.Record{
		Scope: scope, Key: key, Method: "POST", Path: "/v1/things", Fingerprint: "fp-1",
		State: idempotency.StateExecuting, Point: idempotency.PointStarted,
		LockedUntil: now.Add(30 * time.Second), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ttl),
	}
}

// TestStoreContract runs the exported contract suite on both dialects,
// with response encryption off and on.
func TestStoreContract(t *testing.T) {
	for _, dialect := range gormtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			s := gormstore.New(gormtest.Open(t, dialect))
			storetest.Run(t, storetest.Subject{Store: s, Tx: s})
		})
		t.Run(dialect+"/tombstones", func(t *testing.T) {
			t.Parallel()
			s := gormstore.New(gormtest.Open(t, dialect), gormstore.WithTombstones(30*24*time.Hour))
			storetest.Run(t, storetest.Subject{Store: s, Tx: s, TombstoneTTL: 30 * 24 * time.Hour})
		})
		t.Run(dialect+"/encrypted", func(t *testing.T) {
			t.Parallel()
			s := gormstore.New(gormtest.Open(t, dialect), gormstore.WithCipher(newCipher(t, "k1", "k1")))
			storetest.Run(t, storetest.Subject{Store: s, Tx: s})
		})
	}
}

// TestResponseEncryptionAtRest checks what the database holds, and that
// rotation keeps old records replaying, on each dialect.
func TestResponseEncryptionAtRest(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	secret := `{"id":"ord_1","metadata":{"card_note":"very-secret-note"}}`
	resp := idempotency.Answer{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/orders/ord_1"}}, Body: []byte(secret), Final: true}

	completed := func(merchant, key string) *idempotency.Record {
		rec := executing(merchant, key, t0)
		rec.State, rec.Answer = idempotency.StateCompleted, &resp
		return rec
	}
	for _, dialect := range gormtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			db := gormtest.Open(t, dialect)
			column := func(merchant, key string) (body []byte, keyID *string) {
				t.Helper()
				var row struct {
					ResponseBody  []byte
					ResponseKeyID *string
				}
				require.NoError(t, db.Raw(`SELECT response_body, response_key_id FROM idempotency_records
WHERE merchant_id = ? AND idempotency_key = ?`, merchant, key).Scan(&row).Error)
				return row.ResponseBody, row.ResponseKeyID
			}

			plain := gormstore.New(db)
			v1 := gormstore.New(db, gormstore.WithCipher(newCipher(t, "k1", "k1")))
			// Rotated: k2 encrypts, k1 is kept to read older records.
			v2 := gormstore.New(db, gormstore.WithCipher(newCipher(t, "k2", "k1", "k2")))
			// k1 dropped too early.
			k2, err := seal.New(map[string][]byte{"k2": testKey(2)}, "k2")
			require.NoError(t, err)
			onlyK2 := gormstore.New(db, gormstore.WithCipher(k2))

			// Inserted already complete (the Atomic path) and completed later
			// (the Guarded path): both encrypt.
			require.NoError(t, v1.Insert(ctx, completed("m1", "atomic")))
			guarded := executing("m1", "guarded", t0)
			require.NoError(t, v1.Insert(ctx, guarded))
			require.NoError(t, v1.Complete(ctx, "m1", "guarded", guarded.Fence, resp, t0))
			for _, key := range []string{"atomic", "guarded"} {
				body, keyID := column("m1", key)
				require.NotNil(t, keyID)
				require.Equal(t, "k1", *keyID)
				require.NotContains(t, string(body), "very-secret-note", "the column holds ciphertext")
				require.NotEqual(t, []byte(secret), body)
				got, err := v1.Get(ctx, "m1", key, t0)
				require.NoError(t, err)
				require.Equal(t, &resp, got.Answer)
			}

			t.Run("after rotation old records still replay and new ones use the new key", func(t *testing.T) {
				got, err := v2.Get(ctx, "m1", "atomic", t0)
				require.NoError(t, err)
				require.Equal(t, &resp, got.Answer)

				require.NoError(t, v2.Insert(ctx, completed("m1", "after-rotation")))
				_, keyID := column("m1", "after-rotation")
				require.Equal(t, "k2", *keyID)
				got, err = v2.Get(ctx, "m1", "after-rotation", t0)
				require.NoError(t, err)
				require.Equal(t, &resp, got.Answer)
			})

			t.Run("a record under a key no longer held is a clear error", func(t *testing.T) {
				_, err := onlyK2.Get(ctx, "m1", "atomic", t0)
				require.ErrorIs(t, err, seal.ErrKeyUnknown)
				require.ErrorContains(t, err, `"k1"`)
				_, err = plain.Get(ctx, "m1", "atomic", t0)
				require.ErrorIs(t, err, seal.ErrKeyUnknown)
				require.ErrorContains(t, err, "encryption is off")
			})

			t.Run("records written in clear still read with encryption on", func(t *testing.T) {
				require.NoError(t, plain.Insert(ctx, completed("m1", "clear")))
				body, keyID := column("m1", "clear")
				require.Nil(t, keyID)
				require.Equal(t, []byte(secret), body)
				got, err := v2.Get(ctx, "m1", "clear", t0)
				require.NoError(t, err)
				require.Equal(t, &resp, got.Answer)
			})

			t.Run("a ciphertext moved to another record does not decrypt", func(t *testing.T) {
				require.NoError(t, v1.Insert(ctx, completed("m2", "victim")))
				stolen, _ := column("m1", "atomic")
				require.NoError(t, db.Exec(`UPDATE idempotency_records SET response_body = ?
WHERE merchant_id = 'm2' AND idempotency_key = 'victim'`, stolen).Error)
				_, err := v1.Get(ctx, "m2", "victim", t0)
				require.ErrorIs(t, err, seal.ErrUndecryptable)
			})

			t.Run("an empty body round-trips", func(t *testing.T) {
				empty := completed("m1", "empty")
				empty.Answer = &idempotency.Answer{Status: 204, Body: []byte{}, Final: true}
				require.NoError(t, v1.Insert(ctx, empty))
				got, err := v1.Get(ctx, "m1", "empty", t0)
				require.NoError(t, err)
				require.Equal(t, []byte{}, got.Answer.Body)
			})
		})
	}
}

func TestExecutingStats(t *testing.T) {
	for _, dialect := range gormtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := gormtest.Open(t, dialect)
			s := gormstore.New(db)
			t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

			stats, err := s.ExecutingStats(ctx, t0)
			require.NoError(t, err)
			require.Equal(t, gormstore.ExecutingStats{}, stats)

			oldest := executing("m1", "oldest", t0.Add(-time.Hour))
			oldest.LockedUntil = t0.Add(-time.Minute) // abandoned
			require.NoError(t, s.Insert(ctx, oldest))
			require.NoError(t, s.Insert(ctx, executing("m1", "running", t0.Add(-time.Second))))
			done := executing("m2", "done", t0.Add(-2*time.Hour))
			require.NoError(t, s.Insert(ctx, done))
			require.NoError(t, s.Complete(ctx, "m2", "done", done.Fence, idempotency.Answer{Status: 201, Final: true}, t0))
			expired := executing("m3", "expired", t0.Add(-3*time.Hour))
			expired.ExpiresAt = t0.Add(-time.Second)
			require.NoError(t, s.Insert(ctx, expired))

			stats, err = s.ExecutingStats(ctx, t0)
			require.NoError(t, err)
			require.Equal(t, 1, stats.Locked)
			require.Equal(t, 1, stats.Unlocked)
			require.Equal(t, t0.Add(-time.Hour), stats.OldestCreatedAt)
		})
	}
}

// TestAnswersAcrossVersions: a record an older instance wrote (its headers
// column held Content-Type and Location only) replays unchanged, and one
// this version writes keeps those two members where an older instance reads
// them, beside the ETag it now stores.
func TestAnswersAcrossVersions(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, dialect := range gormtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			db := gormtest.Open(t, dialect)
			s := gormstore.New(db)

			old := executing("m1", "old", t0)
			require.NoError(t, s.Insert(ctx, old))
			require.NoError(t, db.Exec(`UPDATE idempotency_records SET state = 'completed', response_status = 201,
    response_headers = '{"Content-Type":"application/json","Location":"/v1/orders/ord_1"}', response_body = ?
WHERE merchant_id = 'm1' AND idempotency_key = 'old'`, []byte(`{"id":"ord_1"}`)).Error)
			got, err := s.Get(ctx, "m1", "old", t0)
			require.NoError(t, err)
			require.Equal(t, &idempotency.Answer{Status: 201, Header: http.Header{
				"Content-Type": {"application/json"}, "Location": {"/v1/orders/ord_1"},
			}, Body: []byte(`{"id":"ord_1"}`), Final: true}, got.Answer)

			rec := executing("m1", "new", t0)
			rec.State, rec.Answer = idempotency.StateCompleted, &idempotency.Answer{Status: 201, Header: http.Header{
				"Content-Type": {"application/json"}, "Location": {"/v1/orders/ord_2"}, "Etag": {`"1"`},
			}, Body: []byte(`{}`), Final: true}
			require.NoError(t, s.Insert(ctx, rec))
			var headers string
			require.NoError(t, db.Raw(`SELECT response_headers FROM idempotency_records
WHERE merchant_id = 'm1' AND idempotency_key = 'new'`).Row().Scan(&headers))
			var older struct {
				ContentType string `json:"Content-Type"`
				Location    string `json:"Location"`
			}
			require.NoError(t, json.Unmarshal([]byte(headers), &older))
			require.Equal(t, "application/json", older.ContentType)
			require.Equal(t, "/v1/orders/ord_2", older.Location)
		})
	}
}

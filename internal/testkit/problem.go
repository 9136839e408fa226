package testkit

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// RequireProblem checks that an answer (its status, header and body) is the
// contract's RFC 9457 problem+json for wantStatus and code: the media type,
// the members every problem carries, a type ending in the code, and no
// Idempotent-Replayed header (a refusal the layer or a handler made now is
// never a replay). It returns the decoded problem for further checks. The
// API's tests, the handlers' and the mock provider's all use this one.
func RequireProblem(t testing.TB, status int, header http.Header, body []byte, wantStatus int, code string) map[string]any {
	t.Helper()
	require.Equal(t, wantStatus, status, string(body))
	require.Equal(t, "application/problem+json", header.Get("Content-Type"), string(body))
	var p map[string]any
	require.NoError(t, json.Unmarshal(body, &p), string(body))
	require.Equal(t, code, p["code"], string(body))
	require.EqualValues(t, wantStatus, p["status"], string(body))
	typ, _ := p["type"].(string)
	require.True(t, strings.HasSuffix(typ, "/"+code), "type %q ends with /%s", typ, code)
	require.NotEmpty(t, p["title"], string(body))
	require.NotEmpty(t, p["detail"], string(body))
	require.Empty(t, header.Get("Idempotent-Replayed"), "a refusal is never a replay")
	return p
}

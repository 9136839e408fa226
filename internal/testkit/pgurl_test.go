package testkit

import (
	"net"
	"strings"
	"testing"

	"github.com/idemkeys/payments/internal/database"
)

func TestWithQueryKeepsEveryHost(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u@h1:5432,h2:5433/db", "postgres://u@h1:5432,h2:5433/db?search_path=s1"},
		{"postgres://u@[::1]:5432,[::1]:5433/db?sslmode=disable", "postgres://u@[::1]:5432,[::1]:5433/db?search_path=s1&sslmode=disable"},
		{"postgresql://u:p@h/db?search_path=old&target_session_attrs=read-write", "postgresql://u:p@h/db?search_path=s1&target_session_attrs=read-write"},
	} {
		got, err := WithQuery(c.in, "search_path", "s1")
		if err != nil || got != c.want {
			t.Errorf("WithQuery(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := WithQuery("postgres://u:secret@h/db?a=%zz", "k", "v"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a bad query: err = %v, want an error without the password", err)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u@h1,h2:5433/test?sslmode=disable", "postgres://u@h1,h2:5433/other?sslmode=disable"},
		{"postgres://u@[::1]:5432,[::1]:5433", "postgres://u@[::1]:5432,[::1]:5433/other"},
	} {
		if got, err := WithDatabase(c.in, "other"); err != nil || got != c.want {
			t.Errorf("WithDatabase(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := WithDatabase("h1/test", "x"); err == nil {
		t.Error("a URL without a scheme was accepted")
	}
}

func TestWithHosts(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:p@h/db?x=1", "postgres://u:p@a:1,[::1]:2/db?x=1"},
		{"postgres://a@b@h1,h2", "postgres://a@b@a:1,[::1]:2"},
		{"postgres://h?x=1", "postgres://a:1,[::1]:2?x=1"},
	} {
		if got, err := WithHosts(c.in, "a:1", "[::1]:2"); err != nil || got != c.want {
			t.Errorf("WithHosts(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestPostgresHosts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
	}{
		{"postgres://u:p@h1,h2:5433/db?x=1", "h1:5432 h2:5433"},
		{"postgres://[::1],[::1]:6432/db", "[::1]:5432 [::1]:6432"},
		{"postgres://127.0.0.1:5432", "127.0.0.1:5432"},
	} {
		got, err := PostgresHosts(c.in)
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("PostgresHosts(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := PostgresHosts("postgres://h1,,h2/db"); err == nil {
		t.Error("an empty host was accepted")
	}
}

func TestRedacted(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:secret@h1,h2/db", "postgres://u:xxxxx@h1,h2/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db?x=a@b", "postgres://h/db?x=a@b"},
	} {
		if got := Redacted(c.in); got != c.want {
			t.Errorf("Redacted(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDatabaseURLWithSeveralHosts points TEST_DATABASE_URL at two hosts, the
// first one refusing connections, as a primary that went down: the schema
// is made and migrated on the second, and the URL handed out keeps both.
// The first is an IPv6 literal, which net/url cannot parse in a list.
func TestDatabaseURLWithSeveralHosts(t *testing.T) {
	base := PostgresURL()
	hosts, err := PostgresHosts(base)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(FreeAddr(t)) // free a moment ago
	dead := "[::1]:" + port                      // nothing listens there
	multi, err := WithHosts(base, append([]string{dead}, hosts...)...)
	if err == nil {
		multi, err = WithQuery(multi, "target_session_attrs", "read-write")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_DATABASE_URL", multi)

	url := DatabaseURL(t, database.Postgres)
	if !strings.Contains(url, dead+","+strings.Join(hosts, ",")) {
		t.Fatalf("the schema's URL %s lost a host", url)
	}
	if n := Count(t, url, "SELECT count(*) FROM idempotency_records"); n != 0 {
		t.Fatalf("a fresh schema holds %d records", n)
	}
	if n := Count(t, url, "SELECT count(*) FROM pg_namespace WHERE nspname = current_schema() AND nspname LIKE 't\\_%'"); n != 1 {
		t.Fatal("the connection does not use the test's schema")
	}
}

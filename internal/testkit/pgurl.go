package testkit

import (
	"fmt"
	"net/url"
	"strings"
)

// WithQuery returns the PostgreSQL URL rawURL with the query parameter key
// set to value (added, or replacing the one there).
//
// A libpq URL may list several hosts, "postgres://u@h1:5432,h2:5433/db"
// (pgx tries them in turn; target_session_attrs=read-write makes it skip a
// standby), and net/url cannot parse every such list: an IPv6 pair
// "[::1]:5432,[::1]:5433" is an "invalid IP-literal" to it. So only the
// query, after the first '?', is parsed here; the scheme, user, hosts and
// database are kept as they were written.
func WithQuery(rawURL, key, value string) (string, error) {
	base, query, _ := strings.Cut(rawURL, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("the query of %s: %w", Redacted(rawURL), err)
	}
	q.Set(key, value)
	return base + "?" + q.Encode(), nil
}

// WithDatabase returns the PostgreSQL URL rawURL naming database db instead
// of its own, hosts and query unchanged.
func WithDatabase(rawURL, db string) (string, error) {
	base, query, hasQuery := strings.Cut(rawURL, "?")
	scheme, rest, ok := strings.Cut(base, "://")
	if !ok {
		return "", fmt.Errorf("%s is not a postgres:// URL", Redacted(rawURL))
	}
	authority, _, _ := strings.Cut(rest, "/")
	out := scheme + "://" + authority + "/" + url.PathEscape(db)
	if hasQuery {
		out += "?" + query
	}
	return out, nil
}

// WithHosts returns the PostgreSQL URL rawURL with its hosts replaced by
// hosts (host:port each), in that order; user, database and query are kept.
func WithHosts(rawURL string, hosts ...string) (string, error) {
	if len(hosts) == 0 {
		return "", fmt.Errorf("WithHosts(%s): no host", Redacted(rawURL))
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return "", fmt.Errorf("%s is not a postgres:// URL", Redacted(rawURL))
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	user := ""
	if i := strings.LastIndex(rest[:end], "@"); i >= 0 {
		user = rest[:i+1]
	}
	return scheme + "://" + user + strings.Join(hosts, ",") + rest[end:], nil
}

// PostgresHosts lists the host:port pairs of a PostgreSQL URL in the order
// a client tries them; a host without a port gets 5432, as libpq's default.
func PostgresHosts(rawURL string) ([]string, error) {
	base, _, _ := strings.Cut(rawURL, "?")
	_, rest, ok := strings.Cut(base, "://")
	if !ok {
		return nil, fmt.Errorf("%s is not a postgres:// URL", Redacted(rawURL))
	}
	authority, _, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		authority = authority[i+1:]
	}
	var hosts []string
	for h := range strings.SplitSeq(authority, ",") {
		switch {
		case h == "":
			return nil, fmt.Errorf("%s has an empty host", Redacted(rawURL))
		case strings.HasPrefix(h, "["): // [::1] or [::1]:5432
			if strings.HasSuffix(h, "]") {
				h += ":5432"
			}
		case !strings.Contains(h, ":"):
			h += ":5432"
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// Redacted is rawURL with its password, if any, replaced by "xxxxx", for
// error messages.
func Redacted(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	at := strings.Index(rest, "@")
	slash := strings.Index(rest, "/")
	if at < 0 || (slash >= 0 && slash < at) {
		return rawURL
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return rawURL
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

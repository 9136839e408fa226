package idemcheck

import (
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// redacted stands in a report for whatever credential it hides.
const redacted = "REDACTED"

// RedactURL returns raw as a report may show it: its user info and every
// query value replaced by REDACTED, and its fragment too. A URL given to
// the checker may carry credentials there (https://user:password@host,
// ?api_key=…, an OAuth token after #), and reports and logs are read by
// more people than the credentials are meant for. It works on the text
// alone, so that a URL that does not parse (or holds {{placeholders}}) is
// redacted all the same, and the rest of it is shown byte for byte.
func RedactURL(raw string) string {
	s, fragment, hasFragment := strings.Cut(raw, "#")
	s, query, hasQuery := strings.Cut(s, "?")
	if i := strings.Index(s, "://"); i >= 0 {
		authority, path := s[i+3:], ""
		if j := strings.IndexByte(authority, '/'); j >= 0 {
			authority, path = authority[:j], authority[j:]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			authority = redacted + authority[at:]
		}
		s = s[:i+3] + authority + path
	}
	if hasQuery {
		parts := strings.Split(query, "&")
		for i, p := range parts {
			switch name, _, ok := strings.Cut(p, "="); {
			case ok:
				parts[i] = name + "=" + redacted
			case p != "":
				parts[i] = redacted
			}
		}
		s += "?" + strings.Join(parts, "&")
	}
	if hasFragment && fragment != "" {
		s += "#" + redacted
	}
	return s
}

// urlInText finds the URLs in free text (a transport error quotes the URL
// it failed on; an answer's body may echo one).
var urlInText = regexp.MustCompile(`(?i)\bhttps?://[^\s"'<>\\]+`)

// credentialName matches the names of query parameters and headers that
// carry credentials, by the words their names are made of.
var credentialName = regexp.MustCompile(`(?i)key|token|secret|pass|pwd|auth|sig|session|credential|cookie|jwt|bearer`)

// A redactor removes the credentials of one Config from the text of a
// report: URLs lose their user info and query values, and the credentials
// the checker sends (in headers and URLs) are replaced wherever they
// appear, since an endpoint may echo them in an answer or an error.
type redactor struct {
	secrets []string // longest first, so that a secret inside another goes with it
}

// Below these lengths a string is too common to replace everywhere
// without mangling the report: a short password still leaves through the
// URL's own redaction, and a username is often a plain word.
const (
	minSecret   = 4
	minUsername = 8
)

func newRedactor(cfg *Config) *redactor {
	seen := map[string]bool{}
	var secrets []string
	add := func(s string, min int) {
		s = strings.TrimSpace(s)
		if len(s) >= min && !seen[s] {
			seen[s] = true
			secrets = append(secrets, s)
		}
	}
	for _, raw := range []string{cfg.URL, cfg.URLVariant, cfg.EffectsURL} {
		u, err := url.Parse(placeholder.ReplaceAllString(raw, "x"))
		if err != nil {
			continue
		}
		if u.User != nil {
			add(u.User.Username(), minUsername)
			if p, ok := u.User.Password(); ok {
				add(p, minSecret)
			}
		}
		for name, values := range u.Query() {
			if credentialName.MatchString(name) {
				for _, v := range values {
					add(v, minSecret)
				}
			}
		}
	}
	for _, h := range []http.Header{cfg.Header, cfg.Header2} {
		for name, values := range h {
			canonical := http.CanonicalHeaderKey(name)
			if !credentialName.MatchString(canonical) {
				continue
			}
			for _, v := range values {
				add(v, minSecret)
				switch canonical {
				case "Authorization", "Proxy-Authorization":
					// "Bearer <token>": the token alone may be echoed.
					if _, token, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
						add(token, minSecret)
					}
				case "Cookie":
					for _, c := range strings.Split(v, ";") {
						if _, value, ok := strings.Cut(c, "="); ok {
							add(value, minSecret)
						}
					}
				}
			}
		}
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	return &redactor{secrets: secrets}
}

// text returns s with every URL redacted and every known credential
// replaced.
func (r *redactor) text(s string) string {
	s = urlInText.ReplaceAllStringFunc(s, RedactURL)
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, redacted)
	}
	return s
}

// exchange returns e with its URL redacted and every credential removed
// from its text.
func (r *redactor) exchange(e Exchange) Exchange {
	e.Note = r.text(e.Note)
	e.URL = r.text(RedactURL(e.URL))
	e.RequestBody = r.text(e.RequestBody)
	e.Body = r.text(e.Body)
	e.Error = r.text(e.Error)
	if e.Header != nil {
		h := make(map[string]string, len(e.Header))
		for name, v := range e.Header {
			h[name] = r.text(v)
		}
		e.Header = h
	}
	return e
}

// result returns res with its reason and evidence redacted.
func (r *redactor) result(res Result) Result {
	res.Reason = r.text(res.Reason)
	if res.Evidence != nil {
		ev := make([]Exchange, len(res.Evidence))
		for i, e := range res.Evidence {
			ev[i] = r.exchange(e)
		}
		res.Evidence = ev
	}
	return res
}

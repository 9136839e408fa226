package app

import (
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
)

// devProviderPrefix is where, in development, the API lets a reader see the
// in-process provider's own read-only answers: its charges and refunds
// (by reference) and its whole ledger, so that "the provider holds exactly
// one charge" can be checked by hand. The in-process provider listens on a
// random loopback port; this is the documented way in. Never in
// production: the ledger holds every merchant's charges, unauthenticated.
const devProviderPrefix = "/dev/provider"

// devProviderRoutes mounts GET /dev/provider/v1/{charges,refunds,ledger}...
// as a reverse proxy to the in-process provider at providerURL.
func devProviderRoutes(r *gin.Engine, providerURL string) error {
	target, err := url.Parse(providerURL)
	if err != nil {
		return err
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, devProviderPrefix)
		pr.Out.URL.RawPath = ""
		pr.Out.Header.Del("Authorization")
	}}
	h := gin.WrapH(proxy)
	for _, p := range []string{"/v1/charges", "/v1/charges/:id", "/v1/refunds", "/v1/refunds/:id", "/v1/ledger"} {
		r.GET(devProviderPrefix+p, h)
	}
	return nil
}

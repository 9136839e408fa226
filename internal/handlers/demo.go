package handlers

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"

	"github.com/gin-gonic/gin"
)

// The checkout page at /demo: plain HTML and vanilla JavaScript that show
// the UI side of idempotency keys. The page makes an operation's key when
// the user clicks, keeps it in sessionStorage with the operation's input, and
// sends that same key on every retry, double click and reload, so that one
// click makes at most one order and one charge however the network behaves.
// demo/checkout.js is the part worth reading.
//
//go:embed demo
var demoFiles embed.FS

// demoPage returns the handler of GET /demo. It builds the page once, with
// the script and the style sheet inlined, so that one route serves all of
// it. It needs no API key: the page asks the user for one and sends it to
// /v1 like any other client. A broken embedded template is a build mistake,
// so it panics when the router is built rather than answer 500 later.
func demoPage(apiKey string) gin.HandlerFunc {
	page, err := renderDemo(apiKey)
	if err != nil {
		panic("handlers: demo page: " + err.Error())
	}
	return func(c *gin.Context) {
		// The page holds no data, but a cached copy would outlive a
		// deployment that changed the script.
		c.Header("Cache-Control", "no-cache")
		c.Header("X-Content-Type-Options", "nosniff")
		c.Data(http.StatusOK, "text/html; charset=utf-8", page)
	}
}

// renderDemo inlines demo/lifecycle.js (the drawing), demo/checkout.js and
// demo/checkout.css into demo/index.html, with apiKey in the key field.
func renderDemo(apiKey string) ([]byte, error) {
	tmpl, err := template.ParseFS(demoFiles, "demo/index.html")
	if err != nil {
		return nil, err
	}
	script, err := demoFiles.ReadFile("demo/checkout.js")
	if err != nil {
		return nil, err
	}
	lifecycle, err := demoFiles.ReadFile("demo/lifecycle.js")
	if err != nil {
		return nil, err
	}
	style, err := demoFiles.ReadFile("demo/checkout.css")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	err = tmpl.Execute(&buf, struct {
		Lifecycle template.JS
		Script    template.JS
		Style     template.CSS
		APIKey    string
	}{template.JS(lifecycle), template.JS(script), template.CSS(style), apiKey})
	return buf.Bytes(), err
}

package ginidem

import (
	"bytes"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency"
)

// captureWriter holds a handler's answer back until the middleware has
// decided its fate: committed with the record, rolled back in favour of a
// replay, or sent as it is.
type captureWriter struct {
	gin.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
}

func newCaptureWriter(w gin.ResponseWriter) *captureWriter {
	return &captureWriter{ResponseWriter: w, header: make(http.Header)}
}

func (w *captureWriter) Header() http.Header { return w.header }

func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *captureWriter) WriteHeaderNow() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
}

func (w *captureWriter) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	return w.body.Write(b)
}

func (w *captureWriter) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	return w.body.WriteString(s)
}

func (w *captureWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *captureWriter) Size() int {
	if w.status == 0 {
		return -1
	}
	return w.body.Len()
}

func (w *captureWriter) Written() bool { return w.status != 0 }

// Flush is a no-op until the answer is decided.
func (w *captureWriter) Flush() {}

// response is the held answer. Its body shares the writer's buffer, which
// is not written again: the handler has returned, and flush only reads it.
func (w *captureWriter) response() idempotency.Response {
	return idempotency.Response{
		Status:      w.Status(),
		ContentType: w.header.Get("Content-Type"),
		Location:    w.header.Get("Location"),
		Body:        w.body.Bytes(),
	}
}

// flush sends the held answer to the client.
func (w *captureWriter) flush() {
	dst := w.ResponseWriter.Header()
	for k, v := range w.header {
		dst[k] = v
	}
	w.ResponseWriter.WriteHeader(w.Status())
	_, _ = w.ResponseWriter.Write(w.body.Bytes())
}

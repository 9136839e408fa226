package app

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/tracing"
)

// LoggerFor is the program's logger as cfg asks for it: JSON lines
// (NewLogger) for log collectors, or, with LOG_FORMAT=text (development's
// default), lines for a person at a terminal.
func LoggerFor(w io.Writer, cfg config.Config) *slog.Logger {
	if !cfg.LogText() {
		return NewLogger(w, cfg.LogLevel)
	}
	return slog.New(tracing.LogHandler(newPeopleHandler(w, logLevel(cfg.LogLevel), colourful(w))))
}

// logLevel reads LOG_LEVEL (config has checked it).
func logLevel(s string) slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(strings.ToUpper(s)))
	return l
}

// colourful reports whether w is a terminal that has not been asked for
// plain text (https://no-color.org).
func colourful(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// peopleHandler writes a record as one line a person reads at a glance:
//
//	14:03:07 listening addr=[::]:8080 dialect=sqlite
//	14:03:09 WARN database not reachable yet; retrying error="..." retry_in=1s
//
// The time of day, the level unless it is INFO, the message as it is, then
// key=value (a value quoted when it has spaces). On a terminal the level is
// coloured and the attributes dimmed. slog's TextHandler prints
// time=... level=... msg="..." on every line, which buries the message;
// this is the small remainder, written here rather than taken from a
// library for some forty lines.
type peopleHandler struct {
	mu     *sync.Mutex
	w      io.Writer
	level  slog.Level
	colour bool
	// attrs are the preformatted " key=value" of With; group is the prefix
	// of WithGroup ("request.").
	attrs string
	group string
}

func newPeopleHandler(w io.Writer, level slog.Level, colour bool) *peopleHandler {
	return &peopleHandler{mu: &sync.Mutex{}, w: w, level: level, colour: colour}
}

// ANSI colours: the level's, and dim for the attributes.
const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
)

func (h *peopleHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *peopleHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	if !r.Time.IsZero() {
		b.WriteString(r.Time.Format(time.TimeOnly))
		b.WriteByte(' ')
	}
	if r.Level != slog.LevelInfo {
		h.paint(&b, levelColour(r.Level), r.Level.String())
		b.WriteByte(' ')
	}
	b.WriteString(r.Message)
	var attrs strings.Builder
	attrs.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&attrs, h.group, a)
		return true
	})
	h.paint(&b, ansiDim, attrs.String())
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *peopleHandler) paint(b *strings.Builder, colour, s string) {
	if s == "" {
		return
	}
	if !h.colour {
		b.WriteString(s)
		return
	}
	b.WriteString(colour + s + ansiReset)
}

func levelColour(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return ansiRed
	case l >= slog.LevelWarn:
		return ansiYellow
	}
	return ansiBlue
}

func (h *peopleHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := *h
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		writeAttr(&b, h.group, a)
	}
	next.attrs = b.String()
	return &next
}

func (h *peopleHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	next := *h
	next.group = h.group + name + "."
	return &next
}

// writeAttr writes " key=value", a group's members as group.key=value.
func writeAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, member := range a.Value.Group() {
			writeAttr(b, prefix, member)
		}
		return
	}
	b.WriteString(" " + prefix + a.Key + "=" + quoteIfNeeded(a.Value.String()))
}

// quoteIfNeeded quotes a value that would not read as one word.
func quoteIfNeeded(s string) string {
	if s == "" || slices.ContainsFunc([]rune(s), func(r rune) bool {
		return unicode.IsSpace(r) || r == '"' || r == '=' || !unicode.IsPrint(r)
	}) {
		return strconv.Quote(s)
	}
	return s
}

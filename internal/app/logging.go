package app

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/term"

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
	return os.Getenv("NO_COLOR") == "" && terminal(w)
}

// terminal reports whether w is a terminal. A character device is not
// enough: /dev/null is one, and it is where os/exec sends a child's stdout
// that nobody reads, so a server started that way would write each line
// to it with a system call of its own. The descriptor is read through
// SyscallConn: f.Fd would put it in blocking mode, a flag that a pipe's
// other users share.
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	c, err := f.SyscallConn()
	if err != nil {
		return false
	}
	tty := false
	_ = c.Control(func(fd uintptr) { tty = term.IsTerminal(int(fd)) }) // fails only on a closed file: no terminal
	return tty
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

// lineBuffers holds the byte slices lines are written into, so that a
// line costs no allocation of its own once the program is warm; one that
// grew past 16 KiB (a huge attribute) is let go rather than kept.
var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (h *peopleHandler) Handle(_ context.Context, r slog.Record) error {
	bp := lineBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	if !r.Time.IsZero() {
		b = r.Time.AppendFormat(b, time.TimeOnly)
		b = append(b, ' ')
	}
	if r.Level != slog.LevelInfo {
		b = h.paint(b, levelColour(r.Level), r.Level.String())
		b = append(b, ' ')
	}
	b = append(b, r.Message...)
	// The attributes, dimmed on a terminal: the colour's codes are taken
	// back when there is none.
	if h.colour {
		b = append(b, ansiDim...)
	}
	mark := len(b)
	b = append(b, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		b = appendAttr(b, h.group, a)
		return true
	})
	switch {
	case !h.colour:
	case len(b) == mark:
		b = b[:mark-len(ansiDim)]
	default:
		b = append(b, ansiReset...)
	}
	b = append(b, '\n')
	h.mu.Lock()
	_, err := h.w.Write(b)
	h.mu.Unlock()
	if cap(b) <= 16<<10 {
		*bp = b
		lineBuffers.Put(bp)
	}
	return err
}

func (h *peopleHandler) paint(b []byte, colour, s string) []byte {
	if s == "" {
		return b
	}
	if !h.colour {
		return append(b, s...)
	}
	b = append(b, colour...)
	b = append(b, s...)
	return append(b, ansiReset...)
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
	b := []byte(h.attrs)
	for _, a := range attrs {
		b = appendAttr(b, h.group, a)
	}
	next.attrs = string(b)
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

// appendAttr appends " key=value", a group's members as group.key=value.
func appendAttr(b []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, member := range a.Value.Group() {
			b = appendAttr(b, prefix, member)
		}
		return b
	}
	b = append(b, ' ')
	b = append(b, prefix...)
	b = append(b, a.Key...)
	b = append(b, '=')
	switch a.Value.Kind() {
	case slog.KindInt64:
		return strconv.AppendInt(b, a.Value.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, a.Value.Uint64(), 10)
	case slog.KindBool:
		return strconv.AppendBool(b, a.Value.Bool())
	}
	return appendWord(b, a.Value.String())
}

// appendWord appends s as it is, or quoted when it would not read as one
// word: empty, or with a space, a quote, an equals sign or a character
// that does not print.
func appendWord(b []byte, s string) []byte {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || r == '"' || r == '=' || !unicode.IsPrint(r)
	}) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// logFlushDelay is how long a log line waits in BufferedLog's buffer at
// most, and logBufferSize how much it gathers before it writes at once.
const (
	logFlushDelay = 2 * time.Millisecond
	logBufferSize = 64 << 10
)

// logWriter gathers the lines logged within logFlushDelay and writes them
// in one go. Each write to a pipe or a file is a system call, and on a
// virtual machine a costly one: the access log's one line per request,
// each written as it came, was a fifth of the CPU of a replay answered
// from memory (perf, 16 clients replaying one key). Gathered, it is one
// write in several milliseconds. A line waits at most logFlushDelay, and
// when nothing is logged nothing runs: the timer is armed by the first
// line after a write. Close writes what is gathered, and lets later lines
// through as they come. What a crash loses is what was logged in its last
// logFlushDelay.
//
// zap's BufferedWriteSyncer does the same with a ticker, which wakes the
// process on every tick whether or not anything was logged; this is the
// part we need, without it (and without zap).
type logWriter struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	delay  time.Duration // logFlushDelay
	timer  *time.Timer
	armed  bool // the timer will flush
	closed bool // Close ran: write through
}

// BufferedLog is w behind a logWriter, unless w is a terminal, where a
// person reads the lines as they come (and where colourful must see the
// terminal itself).
func BufferedLog(w io.Writer) (io.Writer, func()) {
	if terminal(w) {
		return w, func() {}
	}
	l := newLogWriter(w, logFlushDelay)
	return l, func() { _ = l.Close() }
}

// newLogWriter returns a logWriter in front of w that keeps a line for
// delay at most.
func newLogWriter(w io.Writer, delay time.Duration) *logWriter {
	l := &logWriter{w: w, delay: delay}
	l.timer = time.AfterFunc(time.Hour, l.timed)
	l.timer.Stop()
	return l
}

// Write keeps a copy of p (one line, as slog's handlers write), to be
// written within the delay, or at once with what is gathered when that
// is logBufferSize or more.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.w.Write(p)
	}
	l.buf = append(l.buf, p...)
	if len(l.buf) >= logBufferSize {
		return len(p), l.flush()
	}
	if !l.armed {
		l.armed = true
		l.timer.Reset(l.delay)
	}
	return len(p), nil
}

// Close writes what is gathered, and every later line as it comes.
func (l *logWriter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer.Stop()
	l.closed = true
	return l.flush()
}

func (l *logWriter) timed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	_ = l.flush() // as slog does with a line it could not write: nowhere to report it
}

func (l *logWriter) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	_, err := l.w.Write(l.buf)
	l.buf = l.buf[:0]
	return err
}

package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// A span per statement, with its SQL and never its values: those are
// idempotency keys, amounts, emails and stored answers. PostgreSQL is
// traced where pgx sends the statement (a pgx QueryTracer and BatchTracer),
// so the statements that go around GORM are seen too: the pipelined batch
// of an Atomic create (gormstore), BEGIN and COMMIT. SQLite has no pgx, so
// a GORM callback around each statement does the same there.
//
// Both are written here rather than taken from gorm.io/plugin/opentelemetry
// or github.com/exaring/otelpgx. The GORM plugin compiles the ClickHouse and
// MySQL drivers into the binary (to read their DSNs), with tracing on or
// off, and runs four regular expressions per statement. otelpgx is well
// kept, but it brings a sixth version of the semantic conventions package
// into the binary and keeps metrics (a histogram per statement) that the
// API does not export; what the API needs from it is the ~150 lines below.
// The attributes follow the conventions the rest of the SDK uses
// (semconv v1.43.0): db.system.name, db.query.text, db.operation.name,
// db.collection.name, db.query.summary (also the span's name, such as
// "INSERT idempotency_records"), server.address and server.port, and
// db.response.status_code (the SQLSTATE) on a failure.

// tracerName is the instrumentation scope of the statements' spans.
const tracerName = "github.com/idemkeys/payments/internal/database"

// clientKind is made once: the option is an interface, which each call of
// trace.WithSpanKind allocates.
var clientKind = trace.WithSpanKind(trace.SpanKindClient)

// pgxTracer is the pgx tracer of PostgreSQL connections.
type pgxTracer struct {
	tracer trace.Tracer
	// server is server.address and server.port of the connections that
	// carry this tracer, read once from their settings: pgx's
	// Conn.Config() copies the whole configuration at each call.
	server []attribute.KeyValue
	// lastBatch is the text of the connection's last batch (nil: none
	// kept): a connection sends the same batch again and again (every
	// create's three inserts), and the text of one is a kilobyte.
	lastBatch *atomic.Pointer[string]
}

var (
	_ pgx.QueryTracer = pgxTracer{}
	_ pgx.BatchTracer = pgxTracer{}
)

// pgxTracing is the tracer a new pool connection to host:port gets: tp's,
// which records only inside a trace already under way (a request, a
// reconciliation), never the background polling on its own.
func pgxTracing(tp trace.TracerProvider, host string, port uint16) pgxTracer {
	return pgxTracer{
		tracer:    tp.Tracer(tracerName),
		server:    []attribute.KeyValue{semconv.ServerAddress(host), semconv.ServerPort(int(port))},
		lastBatch: new(atomic.Pointer[string]),
	}
}

// start begins a statement's span, unless ctx is in no trace (the
// dispatcher's or the janitor's polling) or in one that records nothing (a
// request the sampler left out, whose children it leaves out too): then
// nothing is built at all.
// A batch (batch > 0) is named BATCH whatever its first statement is.
func (t pgxTracer) start(ctx context.Context, query string, batch int) context.Context {
	op, target := summarize(query)
	name := op
	if batch > 0 {
		op, target, name = "BATCH", "", "BATCH"
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.DBSystemNamePostgreSQL, semconv.DBQueryText(query), semconv.DBOperationName(op))
	if target != "" {
		name = op + " " + target
		attrs = append(attrs, semconv.DBCollectionName(target), semconv.DBQuerySummary(name))
	}
	attrs = append(attrs, t.server...)
	if batch > 0 {
		attrs = append(attrs, semconv.DBOperationBatchSize(batch))
	}
	ctx, _ = t.tracer.Start(ctx, name, clientKind, trace.WithAttributes(attrs...))
	return ctx
}

// TraceQueryStart starts the span of one statement (Exec, Query, QueryRow).
func (t pgxTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	return t.start(ctx, data.SQL, 0)
}

// TraceQueryEnd ends it, once its rows are read.
func (pgxTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.Err)
}

// TraceBatchStart starts one span for a whole batch: its statements are
// sent in one round trip, so their own durations mean little. Its
// db.query.text is theirs joined by "; ", as the conventions say.
func (t pgxTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() || data.Batch == nil {
		return ctx
	}
	queued := data.Batch.QueuedQueries
	return t.start(ctx, t.batchText(queued), len(queued))
}

// batchText is the statements of a batch joined by "; ": the connection's
// last one again when the statements are the same, else a new one, kept.
func (t pgxTracer) batchText(queued []*pgx.QueuedQuery) string {
	if t.lastBatch != nil {
		if last := t.lastBatch.Load(); last != nil && joins(*last, queued) {
			return *last
		}
	}
	n := 2 * (len(queued) - 1)
	for _, q := range queued {
		n += len(q.SQL)
	}
	var b strings.Builder
	b.Grow(n)
	for i, q := range queued {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(q.SQL)
	}
	text := b.String()
	if t.lastBatch != nil {
		t.lastBatch.Store(&text)
	}
	return text
}

// joins reports whether text is the statements of queued joined by "; ".
func joins(text string, queued []*pgx.QueuedQuery) bool {
	for i, q := range queued {
		if i > 0 {
			var ok bool
			if text, ok = strings.CutPrefix(text, "; "); !ok {
				return false
			}
		}
		var ok bool
		if text, ok = strings.CutPrefix(text, q.SQL); !ok {
			return false
		}
	}
	return text == ""
}

// TraceBatchQuery marks the batch's span failed at its first failing
// statement.
func (pgxTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if data.Err != nil {
		fail(trace.SpanFromContext(ctx), data.Err, false)
	}
}

// TraceBatchEnd ends the batch's span.
func (pgxTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, data.Err)
}

// end ends the statement's span that ctx carries. A span recording there
// is the statement's own: start either began one, or left ctx unchanged
// because it was in no trace or in one that records nothing.
func end(ctx context.Context, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if err != nil {
		fail(span, err, false)
	}
	span.End()
}

// fail marks span failed with err, unless err only says that no row
// matched. Values stay out of spans, and some errors quote one: a
// PostgreSQL message ("invalid input syntax for type uuid: ...") or pgx's
// own ("unable to encode ..."). So PostgreSQL gives its SQLSTATE, a lost
// connection or a timeout its message, and anything else its Go type only.
// SQLite's messages (sqlite is true) name constraints and columns, never
// values, and are kept.
func fail(span trace.Span, err error, sqlite bool) {
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) || errors.Is(err, gorm.ErrRecordNotFound) {
		return
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		span.SetAttributes(semconv.DBResponseStatusCode(pgErr.Code), semconv.ErrorTypeKey.String(pgErr.Code))
		span.SetStatus(codes.Error, "SQLSTATE "+pgErr.Code)
	case sqlite, isConnectionError(err), errors.Is(err, context.Canceled):
		span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", err)))
		span.SetStatus(codes.Error, err.Error())
	default:
		span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", err)))
		span.SetStatus(codes.Error, "statement failed (the message is left out: it may quote a value)")
	}
}

// traceGORM registers, around each GORM statement of db, a callback that
// records its span (SQLite, which has no pgx underneath).
func traceGORM(db *gorm.DB, tp trace.TracerProvider) error {
	t := gormTracer{tracer: tp.Tracer(tracerName)}
	cb := db.Callback()
	type register interface {
		Register(name string, fn func(*gorm.DB)) error
	}
	var errs []error
	for _, p := range []struct {
		name          string
		before, after register
	}{
		{"create", cb.Create().Before("gorm:create"), cb.Create().After("gorm:create")},
		{"query", cb.Query().Before("gorm:query"), cb.Query().After("gorm:query")},
		{"update", cb.Update().Before("gorm:update"), cb.Update().After("gorm:update")},
		{"delete", cb.Delete().Before("gorm:delete"), cb.Delete().After("gorm:delete")},
		{"row", cb.Row().Before("gorm:row"), cb.Row().After("gorm:row")},
		{"raw", cb.Raw().Before("gorm:raw"), cb.Raw().After("gorm:raw")},
	} {
		errs = append(errs, p.before.Register("tracing:before_"+p.name, t.before), p.after.Register("tracing:after_"+p.name, t.after))
	}
	return errors.Join(errs...)
}

type gormTracer struct {
	tracer trace.Tracer
}

// spanContext is a statement's context while it runs: its span's, and the
// caller's, put back when the statement ends (a *gorm.DB may run several).
type spanContext struct {
	context.Context
	caller context.Context
}

func (t gormTracer) before(tx *gorm.DB) {
	caller := tx.Statement.Context
	if caller == nil || !trace.SpanContextFromContext(caller).IsValid() {
		return
	}
	// The SQL is built after this callback: the name comes at the end.
	ctx, _ := t.tracer.Start(caller, "sqlite", clientKind)
	tx.Statement.Context = spanContext{Context: ctx, caller: caller}
}

func (t gormTracer) after(tx *gorm.DB) {
	sc, ok := tx.Statement.Context.(spanContext)
	if !ok {
		return
	}
	tx.Statement.Context = sc.caller
	span := trace.SpanFromContext(sc.Context)
	if !span.IsRecording() {
		return
	}
	query := tx.Statement.SQL.String()
	op, target := summarize(query)
	span.SetAttributes(semconv.DBSystemNameSQLite, semconv.DBQueryText(query), semconv.DBOperationName(op))
	name := op
	if target != "" {
		name = op + " " + target
		span.SetAttributes(semconv.DBCollectionName(target), semconv.DBQuerySummary(name))
	}
	if name != "" {
		span.SetName(name)
	}
	if tx.Error != nil {
		fail(span, tx.Error, true)
	}
	span.End()
}

// summarize reads a statement's operation (its first keyword, upper case)
// and the table it works on, when that is plain to see: the name after
// INSERT INTO, UPDATE, DELETE FROM, or the first FROM of a SELECT. It is a
// reading for a trace viewer, not a parser: anything else (WITH, a
// subquery first) gives the operation alone. It allocates nothing for the
// upper-case SQL that GORM and the stores write.
func summarize(query string) (op, target string) {
	word, rest := nextWord(query)
	op = strings.ToUpper(word)
	// after is the word after keyword, looked for in the statement's first
	// words only: the cost stays bounded whatever the statement's length.
	after := func(keyword string) string {
		for range 64 {
			var w string
			if w, rest = nextWord(rest); w == "" {
				return ""
			}
			if strings.EqualFold(w, keyword) {
				return table(rest)
			}
		}
		return ""
	}
	switch op {
	case "INSERT":
		target = after("INTO")
	case "UPDATE":
		target = table(rest)
	case "DELETE", "SELECT":
		target = after("FROM")
	}
	return op, target
}

// nextWord is the first word of s (words end at spaces, commas and
// parentheses) and what follows it.
func nextWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, " \t\r\n,()")
	i := strings.IndexAny(s, " \t\r\n,()")
	if i < 0 {
		i = len(s)
	}
	return s[:i], s[i:]
}

// table is the table's name that s starts with, without quotes; empty when
// s starts with something else (a subquery, a placeholder, an expression).
func table(s string) string {
	if strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "(") {
		return ""
	}
	word, _ := nextWord(s)
	word = strings.Trim(word, `"`)
	for _, r := range word {
		if r != '_' && r != '.' && r != '"' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return ""
		}
	}
	return strings.ReplaceAll(word, `"."`, ".")
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// postgres keeps the orders in PostgreSQL, and is the idempotency
// middleware's fiber.Storage there: the table of gofiber/storage's
// postgres driver (a key, its value, its expiry in Unix seconds, 0 for
// none), written here because that module is not served to this build.
// Every instance on one database sees every stored answer, so a retry on
// another instance reads it (one SELECT) before any work.
type postgres struct {
	pool *pgxpool.Pool
}

// openPostgres connects with at most maxConns connections (20 when empty)
// and creates the two tables if they are missing.
func openPostgres(ctx context.Context, url, maxConns string) (*postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 20
	if maxConns != "" {
		n, err := strconv.Atoi(maxConns)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("DB_MAX_CONNS=%q: want a positive number", maxConns)
		}
		cfg.MaxConns = int32(n)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Under a lock: two instances starting at once would both create a
	// table, and one would fail.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('fiberpeer'))`)
		if err == nil {
			_, err = tx.Exec(ctx, `
CREATE TABLE IF NOT EXISTS fiberpeer_orders (
	id bigserial PRIMARY KEY, merchant text NOT NULL, object text NOT NULL,
	customer_id text NOT NULL, amount int NOT NULL);
CREATE TABLE IF NOT EXISTS fiberpeer_answers (k text PRIMARY KEY, v bytea NOT NULL, e bigint NOT NULL DEFAULT 0)`)
		}
		return err
	}); err != nil {
		pool.Close()
		return nil, err
	}
	return &postgres{pool: pool}, nil
}

func (p *postgres) add(ctx context.Context, m string, _ int64, o order) (order, error) {
	var id int64
	err := p.pool.QueryRow(ctx, `INSERT INTO fiberpeer_orders (merchant, object, customer_id, amount) VALUES ($1, $2, $3, $4) RETURNING id`,
		m, o.Object, o.CustomerID, o.Amount).Scan(&id)
	o.ID = idOf(o.Object, id)
	return o, err
}

func (p *postgres) list(ctx context.Context, m, customerID string) ([]order, error) {
	rows, err := p.pool.Query(ctx, `SELECT id, object, customer_id, amount FROM fiberpeer_orders
WHERE merchant = $1 AND customer_id = $2 AND object = 'order' ORDER BY id`, m, customerID)
	if err != nil {
		return nil, err
	}
	data, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (order, error) {
		var id int64
		var o order
		if err := row.Scan(&id, &o.Object, &o.CustomerID, &o.Amount); err != nil {
			return o, err
		}
		o.ID = idOf(o.Object, id)
		return o, nil
	})
	if data == nil {
		data = []order{} // a JSON list, never null
	}
	return data, err
}

// GetWithContext is the stored answer under key, or nil when there is
// none or it has expired.
func (p *postgres) GetWithContext(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	var e int64
	err := p.pool.QueryRow(ctx, `SELECT v, e FROM fiberpeer_answers WHERE k = $1`, key).Scan(&v, &e)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && e != 0 && e <= time.Now().Unix()) {
		return nil, nil
	}
	return v, err
}

func (p *postgres) Get(key string) ([]byte, error) {
	return p.GetWithContext(context.Background(), key)
}

// SetWithContext stores val under key for exp (0: for good); an empty key
// or value is ignored, as fiber.Storage says.
func (p *postgres) SetWithContext(ctx context.Context, key string, val []byte, exp time.Duration) error {
	if key == "" || len(val) == 0 {
		return nil
	}
	var e int64
	if exp != 0 {
		e = time.Now().Add(exp).Unix()
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO fiberpeer_answers (k, v, e) VALUES ($1, $2, $3)
ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, e = EXCLUDED.e`, key, val, e)
	return err
}

func (p *postgres) Set(key string, val []byte, exp time.Duration) error {
	return p.SetWithContext(context.Background(), key, val, exp)
}

func (p *postgres) DeleteWithContext(ctx context.Context, key string) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM fiberpeer_answers WHERE k = $1`, key)
	return err
}

func (p *postgres) Delete(key string) error {
	return p.DeleteWithContext(context.Background(), key)
}

func (p *postgres) ResetWithContext(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `TRUNCATE fiberpeer_answers`)
	return err
}

func (p *postgres) Reset() error {
	return p.ResetWithContext(context.Background())
}

func (p *postgres) Close() error {
	p.pool.Close()
	return nil
}

#!/bin/sh
# Writes the configuration of this node's PgBouncer, every database
# forwarded to PGBOUNCER_UPSTREAM, ahead of the settings every node shares,
# and runs it (PgBouncer reads no environment itself).
set -eu
: "${PGBOUNCER_UPSTREAM:?set PGBOUNCER_UPSTREAM to the PostgreSQL server this PgBouncer fronts}"
{
	printf '[databases]\n* = host=%s port=5432\n\n' "$PGBOUNCER_UPSTREAM"
	cat /etc/pgbouncer/pgbouncer.ini
} >/run/pgbouncer/pgbouncer.ini
exec pgbouncer /run/pgbouncer/pgbouncer.ini

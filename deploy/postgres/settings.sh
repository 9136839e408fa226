#!/usr/bin/env bash
# Bounds on row-lock waits for the API's role, run once at the database's
# creation. Behind PgBouncer (the ha profile) the API's own start-up settings
# (DB_LOCK_TIMEOUT, DB_IDLE_IN_TRANSACTION_TIMEOUT) are ignored, so every
# server connection takes these from the role instead; without PgBouncer the
# API's settings override them. docs/guide/operations.md ("PgBouncer") says
# why each matters.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
ALTER ROLE "$POSTGRES_USER" SET lock_timeout = '5s';
ALTER ROLE "$POSTGRES_USER" SET idle_in_transaction_session_timeout = '10s';
SQL

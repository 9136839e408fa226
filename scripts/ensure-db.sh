#!/usr/bin/env bash
# Creates the PostgreSQL database named in a postgres:// URL when it does not
# exist yet, by connecting to the same server's "postgres" database.
#
#   scripts/ensure-db.sh 'postgres://postgres@127.0.0.1:5432/payments?sslmode=disable'
set -euo pipefail

url=${1:?usage: $0 postgres://user@host:port/dbname[?params]}
if ! command -v psql >/dev/null; then
	echo "psql not found (Debian: apt-get install postgresql-client)" >&2
	exit 1
fi

base=${url%%\?*}     # the URL without its query
query=${url#"$base"} # "" or "?sslmode=..."
db=${base##*/}
if [[ -z $db || $base != *://*/* ]]; then
	echo "no database name in $url" >&2
	exit 1
fi

if psql "$url" -Atqc 'SELECT 1' >/dev/null 2>&1; then
	exit 0
fi

admin=${base%/*}/postgres$query
exists=$(psql "$admin" -Atq -v db="$db" <<<"SELECT 1 FROM pg_database WHERE datname = :'db';")
if [[ $exists == 1 ]]; then
	# The database is there, so the first connection failed for another reason: show it.
	psql "$url" -Atqc 'SELECT 1' >/dev/null
	exit 1
fi
echo "creating database $db"
psql "$admin" -q -v ON_ERROR_STOP=1 -v db="$db" <<<'CREATE DATABASE :"db";'

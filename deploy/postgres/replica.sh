#!/usr/bin/env bash
# The standby of Compose's ha profile, made as tools/harness makes the
# standby of the failover tests: on first start a base backup of the
# primary (pg_basebackup, the write-ahead log streamed beside it, -R: start
# as a standby), then the server in hot standby, streaming from the primary
# under the name the primary's synchronous_standby_names would list.
# The -c settings are harness.StandbySettings; a test holds them equal.
set -euo pipefail

if [[ ! -s $PGDATA/PG_VERSION ]]; then
	until pg_basebackup -h postgres -p 5432 -U "$POSTGRES_USER" -D "$PGDATA" -R -X stream --checkpoint=fast; do
		echo "replica: waiting for the primary to accept a base backup" >&2
		rm -rf "${PGDATA:?}"/*
		sleep 2
	done
	chmod 0700 "$PGDATA"
fi

exec postgres \
	-c hot_standby=on \
	-c wal_retrieve_retry_interval=250ms \
	-c "primary_conninfo=host=postgres port=5432 user=$POSTGRES_USER password=$PGPASSWORD application_name=standby1"

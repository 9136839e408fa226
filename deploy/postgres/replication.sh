#!/usr/bin/env bash
# Run once by the postgres image when it makes a fresh database (mounted in
# /docker-entrypoint-initdb.d): lets a standby of Compose's ha profile stream
# from this server. The image's own pg_hba.conf admits every database but
# not the replication protocol, which pg_basebackup and the standby's
# walreceiver speak. A volume made before this file was mounted lacks the
# line: add it by hand, or start over with `docker compose down -v`.
set -euo pipefail
echo "host replication all all scram-sha-256" >>"$PGDATA/pg_hba.conf"

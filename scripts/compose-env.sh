#!/usr/bin/env bash
# Writes the secrets file of `docker compose up` (production mode) with fresh
# random secrets, unless it exists already:
#
#   scripts/compose-env.sh [deploy/compose.env]
set -euo pipefail

out=${1:-deploy/compose.env}
if [[ -e $out ]]; then
	echo "$out exists; remove it first to make new secrets" >&2
	exit 1
fi
if ! command -v openssl >/dev/null; then
	echo "openssl not found (Debian: apt-get install openssl)" >&2
	exit 1
fi
log_secret=$(openssl rand -hex 32)
provider_key_secret=$(openssl rand -hex 32)
webhook_secret=$(openssl rand -hex 32)
umask 077
cat >"$out" <<ENV
# Made by scripts/compose-env.sh; git-ignored. See deploy/compose.env.example.
APP_ENV=production
DEMO_SEED=false
LOG_KEY_SECRET=$log_secret
PROVIDER_KEY_SECRET=$provider_key_secret
PROVIDER_WEBHOOK_SECRET=$webhook_secret
WEBHOOK_SECRET=$webhook_secret
ENV
echo "wrote $out (mode 600)"

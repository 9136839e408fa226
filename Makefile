# Every target with a "## " comment is listed by `make help`, the default goal.
# Variables can be set on the command line: `make fuzz FUZZTIME=1m`.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

GO ?= go
# How long `make fuzz` runs each fuzz target. `make test` runs every fuzz
# target's committed corpus as a test; exploring is `make fuzz` (on this
# 2-core machine, compiling each target for fuzzing cost ~10 minutes of
# make test for 2 s of fuzzing each).
FUZZTIME ?= 10s
# The database `make run-pg` uses; `make db` creates it if it is missing.
PG_URL ?= postgres://postgres@127.0.0.1:5432/payments?sslmode=disable
# Extra flags of `make bench`: BENCH_FLAGS="-quick -out ''" is a smoke run of
# about three minutes that writes nothing (`go run ./tools/bench -h` lists them).
BENCH_FLAGS ?=
# How many random schedules `make explore` draws per scenario.
EXPLORE_RANDOM ?= 20000
# Where `make provider` delivers its webhooks: an API started with `make run`.
WEBHOOK_URL ?= http://127.0.0.1:8080/v1/webhooks/provider

# Tools run at pinned versions through `go run`; Go caches the built binaries,
# so only the first call compiles them (golangci-lint: about a minute).
GOLANGCI_LINT := $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
# swag v2 writes OpenAPI 3.1 (--v3.1); scripts/openapifix then states what
# its annotations cannot (nullability, closed objects, header rules, the key
# pattern). Every member is required unless tagged validate:"optional".
SWAG := $(GO) run github.com/swaggo/swag/v2/cmd/swag@v2.0.0-rc6
SWAG_INIT_FLAGS := --v3.1 -g cmd/api/main.go -o api --parseInternal --outputTypes json --requiredByDefault

.PHONY: help run run-pg db provider demo merchant migrate test test-short explore path fuzz bench chaos lint fmt \
	swagger swagger-check spec-lint build clean compose-up compose-down ci

help: ## Show this list
	@echo "Usage: make <target> [VAR=value]"
	@awk 'BEGIN { FS = ":.*## " } \
		/^## / { printf "\n%s\n", substr($$0, 4) } \
		/^[a-zA-Z0-9_-]+:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo
	@echo "Variables: FUZZTIME=$(FUZZTIME) PG_URL=$(PG_URL) BENCH_FLAGS=$(BENCH_FLAGS)"

## Running

# run and run-pg build bin/api as `make build` does (a first build says what
# it downloads and compiles, with its progress), then run it until Ctrl-C.
run: ## Run the API on embedded SQLite (./data/) with the in-process provider; needs only Go
	@DATABASE_URL= GO='$(GO)' scripts/run.sh

run-pg: db ## Run the API on local PostgreSQL (PG_URL); set REDIS_URL to add Redis
	@DATABASE_URL='$(PG_URL)' GO='$(GO)' scripts/run.sh

db: ## Create the PostgreSQL database named in PG_URL if it is missing
	@scripts/ensure-db.sh '$(PG_URL)'

provider: ## Run the mock provider on :8081, sending webhooks to WEBHOOK_URL
	WEBHOOK_URL='$(WEBHOOK_URL)' $(GO) run ./cmd/provider

demo: ## Against a running API (API_URL, API_KEY): lost provider response, 202, reconcile, replay
	$(GO) run ./tools/demo

merchant: ## Create a merchant and print its API key once: make merchant NAME=initech
	@[[ -n "$(NAME)" ]] || { echo "usage: make merchant NAME=<name> [DATABASE_URL=...]"; exit 2; }
	$(GO) run ./cmd/api create-merchant -name '$(NAME)'

migrate: ## Apply the migrations to DATABASE_URL (empty: the SQLite file) and exit
	$(GO) run ./cmd/api migrate

## Testing and checks

test: ## Run both tiers of tests with -race (every fuzz target's corpus included); summarises skips
	scripts/test.sh unit

test-short: ## Run the quick tier (go test -short: unit and database tests) with -race, without fuzzing
	scripts/test.sh short

# make explore: every scenario of the schedule explorer exhaustively to two
# preemptions, then EXPLORE_RANDOM random schedules each from a seed drawn
# now and printed (a failure prints the seed or schedule that replays it).
explore: ## Explore the core's schedules at length (~5 min): two preemptions, 20,000 random each; prints its seed
	@seed=$${EXPLORE_SEED:-$$(date +%s)}; echo "make explore: first seed $$seed"; \
		$(GO) test -count=1 -timeout 60m -v -run 'TestSchedules$$' ./internal/idempotency/explore \
			-preemptions 2 -random $(EXPLORE_RANDOM) -first-seed $$seed | grep -vE '^=== (RUN|PAUSE|CONT)'

# make path: the code that one order create (Atomic) and one payment
# (Guarded) run, as docs/design/operation.md counts its path: cmd/api built
# with coverage serves a warm-up, then one more request, and
# tools/pathcount subtracts the profile without that request from the one
# with it, and lists the functions that request ran, then its steps: the
# calls from one file to another. Needs PostgreSQL.
PATH_SKIP := ^internal/(testkit|app/apptest)/|^internal/provider/(server|charges|refunds|ledger|model|inmemory|start|problem)\.go
path: ## List the functions, files and cross-file calls one order create and one payment run (coverage of each request alone)
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
		$(GO) build -cover -covermode=atomic -coverpkg=./internal/...,./cmd/... -o $$dir/api ./cmd/api && \
		PATH_API_BINARY=$$dir/api PATH_PROFILE_DIR=$$dir $(GO) test -count=1 -run '^TestPathOfOneRequest$$' ./internal/app >/dev/null && \
		for r in base create payment; do $(GO) tool covdata textfmt -i=$$dir/$$r -o=$$dir/$$r.txt || exit 1; done; \
		$(GO) build -o $$dir/pathcount ./tools/pathcount && \
		echo "== one order create (Atomic)" && $$dir/pathcount -skip '$(PATH_SKIP)' -base $$dir/base.txt $$dir/create.txt && \
		echo && echo "== one payment (Guarded)" && $$dir/pathcount -skip '$(PATH_SKIP)' -base $$dir/create.txt $$dir/payment.txt && \
		echo && echo "== one order create (Atomic): its steps" && $$dir/pathcount -calls -skip '$(PATH_SKIP)' -base $$dir/base.txt $$dir/create.txt && \
		echo && echo "== one payment (Guarded): its steps" && $$dir/pathcount -calls -skip '$(PATH_SKIP)' -base $$dir/create.txt $$dir/payment.txt

fuzz: ## Run each fuzz target for FUZZTIME (make fuzz FUZZTIME=5m)
	FUZZTIME='$(FUZZTIME)' scripts/test.sh fuzz

bench: ## Measure idempotency's cost beside the database's own limit; writes docs/benchmarks.md (~30 min; see BENCH_FLAGS)
	timeout 45m $(GO) run ./tools/bench $(BENCH_FLAGS)

chaos: ## Fault runs (kills, outages, retry storms) with an exactly-once audit; writes docs/reliability.md
	timeout 10m $(GO) run ./tools/chaos -profile full

lint: ## Check gofmt, go vet and golangci-lint v2.15.0 (.golangci.yml)
	@out=$$(gofmt -l .); if [[ -n "$$out" ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

fmt: ## Format all Go files with gofmt
	gofmt -w .

# swag exits 0 even when it could not parse a type (the schema is then
# missing or wrong), so its own report of errors and warnings fails the
# target. The one warning it always gives, that the module's root holds no
# Go package, is expected.
swagger: ## Regenerate the OpenAPI 3.1 spec api/swagger.json from the handlers' annotations (swag v2.0.0-rc6, then scripts/openapifix)
	@out=$$($(SWAG) init $(SWAG_INIT_FLAGS) 2>&1) || { echo "$$out"; exit 1; }; \
		if grep -E 'Error parsing|Error extracting|warning:' <<<"$$out" | grep -v 'failed to get package name in dir: \./,'; then \
			echo "swag reported the problems above"; exit 1; fi
	$(GO) run ./scripts/openapifix api/swagger.json

# Redocly CLI's recommended rules over the committed document: any error
# fails. The npm tools come from scripts/spec/package-lock.json (npm ci, a
# few seconds with npm's cache); Redocly's telemetry and update check are
# off, so nothing else is fetched.
spec-lint: ## Lint api/swagger.json with Redocly CLI 2.77.0 (recommended rules; errors fail, warnings are shown)
	cd scripts/spec && npm ci --no-audit --no-fund --loglevel=error
	cd scripts/spec && REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
		npx --no-install redocly lint ../../api/swagger.json --config redocly.yaml --format=stylish

# The Go client that oapi-codegen (a tool of go.mod) generates from the
# document is not committed: TestGeneratedClientRoundTrip in internal/app
# generates it into a temporary folder and drives the API with it. To read
# it: go tool oapi-codegen -generate types,client -package openapiclient api/swagger.json
swagger-check: swagger ## Regenerate api/ and fail if it differs from what is committed
	@if ! git diff --exit-code -- api/ || [[ -n "$$(git status --porcelain -- api/)" ]]; then \
		echo "api/ is out of date: run 'make swagger' and commit it"; exit 1; fi

ci: ## Run what CI runs: .ci/run starts PostgreSQL, Redis and NATS if needed, then make test
	bash .ci/run

## Building

build: ## Build static binaries bin/api and bin/provider
	CGO_ENABLED=0 $(GO) build -trimpath -tags nomsgpack -o bin/ ./cmd/api ./cmd/provider

clean: ## Remove bin/ (the SQLite data in ./data/ is left alone)
	rm -rf bin/

compose-env: ## Write deploy/compose.env (git-ignored) with fresh secrets for Compose's production mode
	@scripts/compose-env.sh deploy/compose.env

compose-up: ## Start PostgreSQL, Redis, the provider and the API (production mode) with Docker Compose; needs deploy/compose.env
	@[[ -f deploy/compose.env ]] || { echo "deploy/compose.env is missing: run make compose-env first"; exit 2; }
	docker compose up --build

compose-merchant: ## Create a merchant in the Compose database and print its API key once: make compose-merchant NAME=initech
	@[[ -n "$(NAME)" ]] || { echo "usage: make compose-merchant NAME=<name>"; exit 2; }
	docker compose run --rm api api create-merchant -name '$(NAME)'

compose-down: ## Stop the Compose services (add -v by hand to drop the database volume)
	docker compose down

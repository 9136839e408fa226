#!/usr/bin/env bash
# make run and make run-pg: builds bin/api, saying what a first build
# downloads and compiles and showing its progress, then runs it in the
# foreground until Ctrl-C (or SIGTERM), which stops the API gracefully.
#
#   scripts/run.sh [args for bin/api...]
#
# The binary is built, then run, rather than `go run`: go run reports a
# program stopped by Ctrl-C as "exit status 1", which make then prints as an
# error. It is built as `make build` builds it, so the two share the build
# cache.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
bin=bin/api
build=(env CGO_ENABLED=0 "$GO" build -trimpath -tags nomsgpack)

# The figures a newcomer is told, measured with empty caches on a quiet
# 2-core machine (the README has them): the modules cmd/api
# needs, and its build.
download_note="73 modules, 635 MB in the module cache; about 15 s on a fast network"
cold_note="about 2 to 5 minutes on 2 cores; later builds take seconds"

say() { printf '%s\n' "run: $*"; }
elapsed() { printf '%dm%02ds' $((SECONDS / 60)) $((SECONDS % 60)); }

# 1. Modules. modernc.org/sqlite stands for them all: a first run has none.
if [[ -z $("$GO" list -m -f '{{.Dir}}' modernc.org/sqlite 2>/dev/null) ]]; then
	say "first run: downloading the modules cmd/api needs ($download_note)"
	n=0
	"$GO" list -tags nomsgpack -deps ./cmd/api 2>&1 >/dev/null | while IFS= read -r line; do
		if [[ $line == "go: downloading "* ]]; then
			n=$((n + 1))
			printf '  [%3d] %s\n' "$n" "${line#go: downloading }"
		else
			printf '%s\n' "$line"
		fi
	done
	say "modules ready after $(elapsed)"
fi

# 2. Compiling. go build -n lists the compiler runs a build would make
# without making them: none when the cache is warm and nothing changed.
total=$("${build[@]}" -n -o "$bin" ./cmd/api 2>&1 | grep -c '/compile ' || true)
if ((total > 100)); then
	say "compiling $total packages into $bin ($cold_note)"
elif ((total > 0)); then
	say "compiling $total changed packages into $bin"
fi
start=$SECONDS
done_=0
# -v names each package as it is compiled: the progress. On a terminal it
# is one line rewritten in place; in a log, a line at every tenth.
"${build[@]}" -v -o "$bin" ./cmd/api 2>&1 | while IFS= read -r line; do
	if [[ $line == *" "* || $line == "#"* ]]; then
		printf '%s\n' "$line" # the compiler's own message: an error, shown whole
		continue
	fi
	done_=$((done_ + 1))
	((total > 100)) || continue
	if [[ -t 1 ]]; then
		printf '\r  [%3d/%d] %-70.70s' "$done_" "$total" "$line"
	elif ((done_ * 10 / total != (done_ - 1) * 10 / total)); then
		printf '  [%3d/%d] %s\n' "$done_" "$total" "$line"
	fi
done
if ((total > 100)); then
	[[ -t 1 ]] && printf '\r%-90s\r' ""
	say "built $bin in $((SECONDS - start)) s"
fi

# 3. Running. Ctrl-C reaches the API (and make) from the terminal: the API
# finishes its requests and stops with status 0, and so does this script.
say "starting $bin; Ctrl-C stops it"
status=0
"$bin" "$@" || status=$?
if ((status == 0)); then
	say "the API stopped cleanly"
fi
exit "$status"

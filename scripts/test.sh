#!/usr/bin/env bash
# Runs the test suite the way the README and CI do, and says plainly at the end
# what passed, what failed and what was skipped (and why).
#
#   scripts/test.sh all    every test of both tiers with -race, then each fuzz target
#   scripts/test.sh unit   every test of both tiers with -race, no fuzzing
#   scripts/test.sh short  the quick tier only (go test -short: unit and database
#                          tests, no binaries, processes or browser) with -race
#   scripts/test.sh fuzz   each fuzz target only
#
# FUZZTIME (default 10s) is how long each fuzz target runs. Tests that need
# PostgreSQL or Redis skip with a line starting "SKIPPED:" when the service is
# not reachable, unless CI=true, where they fail instead.
set -uo pipefail

mode=${1:-all}
case $mode in
all | unit | short | fuzz) ;;
*)
	echo "usage: $0 [all|unit|short|fuzz]" >&2
	exit 2
	;;
esac
fuzztime=${FUZZTIME:-10s}

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

logdir=$(mktemp -d -t payments-test.XXXXXX) || exit 1
unit_log=$logdir/go-test.log
fuzz_log=$logdir/fuzz.log
unit_rc=0
fuzz_failed=()
fuzz_passed=()

# fuzz_targets prints "<package dir> <FuzzName>" for every fuzz target in the
# module's test files, found by reading the source (no compiling needed).
fuzz_targets() {
	grep -rEo --include='*_test.go' --exclude-dir=.git --exclude-dir=testdata --exclude-dir=vendor \
		'^func Fuzz[A-Za-z0-9_]*\(\w+ \*testing\.F\)' . |
		sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*$#\1 \2#' |
		sort -u
}

run_unit() {
	# -timeout: go test's default of 10 minutes per package is close to what
	# internal/app (every binary-driven test, with -race) takes on a loaded
	# 2-core machine; a package that hangs still ends the run.
	local flags=(-race -count=1 -timeout=25m -v)
	[[ $mode == short ]] && flags=(-short "${flags[@]}")
	echo "==> go test ${flags[*]} ./...   (full log: $unit_log)"
	# The log keeps everything; the terminal is spared the === RUN/PAUSE/CONT lines.
	go test "${flags[@]}" ./... 2>&1 | tee "$unit_log" |
		grep --line-buffered -vE '^[[:space:]]*=== (RUN|PAUSE|CONT|NAME)'
	unit_rc=${PIPESTATUS[0]}
}

run_fuzz() {
	local dir name
	: >"$fuzz_log"
	while read -r dir name; do
		[[ -n $name ]] || continue
		echo "==> fuzz $name in $dir for $fuzztime"
		if go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$dir" </dev/null 2>&1 | tee -a "$fuzz_log"; then
			fuzz_passed+=("$name")
		else
			fuzz_failed+=("$name ($dir)")
		fi
	done < <(fuzz_targets)
}

count() { grep -cE "^[[:space:]]*--- $1: " "$unit_log"; }

summary() {
	echo
	echo "==> summary (logs in $logdir)"
	if [[ $mode != fuzz ]]; then
		local passed failed skipped
		passed=$(count PASS)
		failed=$(count FAIL)
		skipped=$(count SKIP)
		echo "packages: $(grep -cE '^ok[[:space:]]' "$unit_log") ok, $(grep -cE '^FAIL[[:space:]]' "$unit_log") failed, $(grep -c '\[no test files\]' "$unit_log") without tests"
		if ((failed > 0)); then
			echo "failed tests:"
			grep -E '^[[:space:]]*--- FAIL: ' "$unit_log" | sed -E 's/^[[:space:]]*--- FAIL: /  /'
		fi
		if ((skipped > 0)); then
			echo "skipped tests ($skipped):"
			grep -E '^[[:space:]]*--- SKIP: ' "$unit_log" | sed -E 's/^[[:space:]]*--- SKIP: /  /' | head -n 25
			((skipped > 25)) && echo "  ... and $((skipped - 25)) more (see the log)"
			if grep -q 'SKIPPED:' "$unit_log"; then
				echo "why (each distinct SKIPPED: line, with how often it was printed):"
				grep -oE 'SKIPPED: .*' "$unit_log" | sort | uniq -c | sort -rn
			fi
		fi
	fi
	if [[ $mode == all || $mode == fuzz ]]; then
		if ((${#fuzz_passed[@]} + ${#fuzz_failed[@]} == 0)); then
			echo "fuzz: no fuzz targets found"
		else
			echo "fuzz ($fuzztime each): ${#fuzz_passed[@]} passed: ${fuzz_passed[*]:-none}"
			if ((${#fuzz_failed[@]} > 0)); then
				echo "fuzz FAILED: ${fuzz_failed[*]}"
				echo "  a failing input was saved under the package's testdata/fuzz/; commit it as a regression case once fixed"
			fi
		fi
	fi
	if [[ $mode != fuzz ]]; then
		echo "tests: $passed passed, $failed failed, $skipped skipped"
	fi
}

[[ $mode != fuzz ]] && run_unit
[[ $mode == all || $mode == fuzz ]] && run_fuzz
summary

if ((unit_rc != 0)); then
	exit "$unit_rc"
fi
((${#fuzz_failed[@]} == 0))

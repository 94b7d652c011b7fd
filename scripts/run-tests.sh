#!/bin/sh
# Runs every test suite and prints their combined "N passed, N failed" as the last line:
#   1. the C unit and end-to-end tests (the binary given as $1),
#   2. the deployment manifest checks (tests/deploy/check_manifests.py; skipped without python3),
#   3. the layer check (scripts/check-layers.py: every #include points down a layer, no include circle).
# Exits non-zero when any suite fails or does not end with its summary line.
set -u
bin=$1
passed=0 failed=0 rc=0
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT

run_suite() {
    name=$1; shift
    "$@" >"$out" 2>&1
    status=$?
    cat "$out"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    if [ -z "$line" ]; then
        echo "not ok - $name ended without a summary line (exit status $status)"
        failed=$((failed + 1)); rc=1; return
    fi
    p=${line%% passed*}
    f=${line#*passed, }; f=${f%% failed*}
    passed=$((passed + p)); failed=$((failed + f))
    [ "$status" -eq 0 ] || rc=1
}

run_suite "unit tests" "$bin"
if command -v python3 >/dev/null 2>&1; then
    run_suite "deploy manifest checks" python3 tests/deploy/check_manifests.py
    run_suite "layer check" python3 scripts/check-layers.py
else
    echo "# SKIP deploy manifest checks and layer check: python3 is not installed"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || rc=1
exit $rc

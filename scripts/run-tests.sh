#!/bin/sh
# Runs every test suite and prints their combined "N passed, N failed" as the last line:
#   1. the C unit and end-to-end tests (the binary given as $1), several at once: each in a process of its own,
#      its output printed whole when it ends (tests/unit/main.c, -j);
#   2. the deployment manifest checks (tests/deploy/check_manifests.py; skipped without python3), beside them;
#   3. the layer check (scripts/check-layers.py: every #include points down a layer, no include circle), beside
#      them too.
# With a FILTER (sh scripts/run-tests.sh BINARY FILTER) only the C tests whose name or file contains it run.
# TEST_JOBS sets how many C tests run at once (default: 3 per CPU; 1 runs them one after another in one process).
# Exits non-zero when any suite fails or does not end with its summary line.
set -u
bin=$1
filter=${2-}
jobs=${TEST_JOBS:-$((3 * $(nproc 2>/dev/null || echo 2)))}
passed=0 failed=0 rc=0
out=$(mktemp) || exit 1
manifests=$(mktemp) || exit 1
layers=$(mktemp) || exit 1
pids=
trap 'rm -f "$out" "$out.status" "$manifests" "$manifests.status" "$layers" "$layers.status"
      for p in $pids; do kill "$p" 2>/dev/null; done' EXIT

# Add a suite's summary line (the last such line of its output, in file) to the totals.
count_suite() {
    name=$1 file=$2 status=$3
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$file" | tail -n 1)
    if [ -z "$line" ]; then
        echo "not ok - $name ended without a summary line (exit status $status)"
        failed=$((failed + 1)); rc=1; return
    fi
    p=${line%% passed*}
    f=${line#*passed, }; f=${f%% failed*}
    passed=$((passed + p)); failed=$((failed + f))
    [ "$status" -eq 0 ] || rc=1
}

# A python suite in the background: its output in file, its exit status in file.status.
start_python() {
    file=$1; shift
    { python3 "$@" >"$file" 2>&1; echo $? >"$file.status"; } &
    pids="$pids $!"
}

python_checks=false
if [ -z "$filter" ]; then
    if command -v python3 >/dev/null 2>&1; then
        python_checks=true
        start_python "$manifests" tests/deploy/check_manifests.py
        start_python "$layers" scripts/check-layers.py
    fi
fi

# The C tests' lines as they come (each test's once it has ended), and its exit status through a file: a pipe
# would give tee's.
{ "$bin" -j "$jobs" ${filter:+"$filter"} 2>&1; echo $? >"$out.status"; } | tee "$out"
count_suite "unit tests" "$out" "$(cat "$out.status" 2>/dev/null || echo 1)"

if $python_checks; then
    wait
    pids=
    cat "$manifests"
    count_suite "deploy manifest checks" "$manifests" "$(cat "$manifests.status" 2>/dev/null || echo 1)"
    cat "$layers"
    count_suite "layer check" "$layers" "$(cat "$layers.status" 2>/dev/null || echo 1)"
elif [ -z "$filter" ]; then
    echo "# SKIP deploy manifest checks and layer check: python3 is not installed"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || rc=1
exit $rc

#!/bin/sh
# `make fuzz`: builds the libFuzzer targets of tests/fuzz with clang, ASan and UBSan into
# build-fuzz/, runs each for FUZZ_SECONDS (default 10) and prints, per target, the inputs
# executed, executions per second, coverage gained and findings. Exits 1 if any target found
# a crash, a sanitizer report, a leak or a timeout. See tests/fuzz/README.md.
#
#   scripts/fuzz.sh [TARGET...]        all targets, or only those named
#   scripts/fuzz.sh --merge TARGET...  minimise tests/fuzz/corpus/TARGET in place (-merge=1)
#
# Environment: FUZZ_SECONDS (per target), FUZZ_ARGS (extra libFuzzer flags, e.g. -jobs=2),
# FUZZ_BUILD (the build directory, default build-fuzz: a second one lets two campaigns run).
# New inputs go to build-fuzz/corpus/TARGET (the repository's corpus is only read), findings
# to build-fuzz/crashes/TARGET/, each run's log to build-fuzz/logs/TARGET.log.
set -u
B=${FUZZ_BUILD:-build-fuzz}
secs=${FUZZ_SECONDS:-10}
extra=${FUZZ_ARGS:-}
merge=0
[ "${1:-}" = "--merge" ] && { merge=1; shift; }

# clang and compiler-rt (libFuzzer) only for this: installed as root on Debian, named otherwise.
TESSERA_DEPS_FUZZ=1 sh scripts/deps.sh || exit 1
probe=$(mktemp -d) || exit 1
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }\n' >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
    echo "fuzz: clang cannot build a libFuzzer binary:" >&2
    cat "$probe/log" >&2
    echo "fuzz: install clang and its compiler-rt (Debian: apt-get install clang libclang-rt-dev)" >&2
    rm -rf "$probe"; exit 1
fi
rm -rf "$probe"

make --no-print-directory BUILD=$B CC=clang OPT="-O1 -g" \
    SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer" \
    fuzz-build || exit 1

targets="$*"
[ -n "$targets" ] || targets=$(ls tests/fuzz/fuzz_*.c | sed -n 's|tests/fuzz/fuzz_\(.*\)\.c|\1|p' | grep -v '^targets$')

# Findings stop a run: leaks are checked after every input, a 10 s input is a timeout.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
flags="-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -dict=tests/fuzz/dict/tessera.dict"

if [ $merge = 1 ]; then
    for t in $targets; do
        out=$B/merge/$t; rm -rf "$out"; mkdir -p "$out"
        $B/fuzz/fuzz_$t -merge=1 $flags "$out" "tests/fuzz/corpus/$t" >"$B/merge-$t.log" 2>&1 || {
            echo "fuzz: merge of $t failed, see $B/merge-$t.log" >&2; exit 1; }
        before=$(ls "tests/fuzz/corpus/$t" | wc -l)
        rm -f "tests/fuzz/corpus/$t"/*
        cp "$out"/* "tests/fuzz/corpus/$t"/
        echo "fuzz: $t: corpus $before -> $(ls "tests/fuzz/corpus/$t" | wc -l) files"
    done
    exit 0
fi

mkdir -p $B/logs
found=0
printf '%-16s %12s %10s %9s %8s  %s\n' target execs execs/s new-cov corpus findings
for t in $targets; do
    [ -x $B/fuzz/fuzz_$t ] || { echo "fuzz: no target $t" >&2; exit 2; }
    work=$B/corpus/$t art=$B/crashes/$t log=$B/logs/$t.log
    mkdir -p "$work" "$art"
    rm -f "$art"/*
    $B/fuzz/fuzz_$t -max_total_time="$secs" $flags -artifact_prefix="$art/" $extra \
        "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
    # "#123 INITED cov: 456 ..." then progress lines; the last "#N ... cov: C" has the totals.
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    [ -n "$rate" ] || rate=$(sed -n 's/.*exec\/s: \([0-9]*\).*/\1/p' "$log" | tail -n 1)
    cov0=$(sed -n 's/.*INITED cov: \([0-9]*\).*/\1/p' "$log" | head -n 1)
    cov1=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' "$log" | tail -n 1)
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' "$log" | tail -n 1)
    newcov=$(( ${cov1:-0} - ${cov0:-${cov1:-0}} ))
    n=$(ls "$art" | wc -l)
    what=none
    if [ "$n" -gt 0 ]; then
        found=1
        what="$n: $(ls "$art" | tr '\n' ' ')(see $log)"
    elif grep -q '^==[0-9]*==ERROR\|runtime error:\|fuzz: invariant broken' "$log"; then
        found=1
        what="report without an artifact (see $log)"
    fi
    printf '%-16s %12s %10s %9s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "+$newcov" "${corp:-?}" "$what"
done
if [ $found = 1 ]; then
    echo "fuzz: findings above. Reproduce with $B/fuzz/fuzz_TARGET FILE; once fixed, keep the input as"
    echo "fuzz: tests/fuzz/crashes/TARGET/<short-name> so make test replays it."
    exit 1
fi

#!/bin/sh
# Runs the test suite N times with LOAD CPU hogs beside it and prints, per test that failed at least once,
# its failures out of N, then the wall time of each run and the whole.
#
#   sh scripts/stress.sh [-n N] [-l LOAD] [-f FILTER] [-o DIR] TEST_BINARY
#
#   -n N       runs (default 20)
#   -l LOAD    CPU hogs started beside the runs (default: twice the CPUs, `nproc`): each is a process that
#              spins in a shell loop, wanting 100 percent of one CPU at normal priority, for the whole stress
#              run. 0: no hogs.
#   -f FILTER  run only the tests whose name or file contains FILTER (scripts/run-tests.sh BINARY FILTER);
#              default: the whole suite, exactly as `make test` runs it.
#   -o DIR     where each run's output is kept (default build/stress, or build-asan/stress for an ASan
#              binary); run-K.txt is run K's whole output.
#
# Exits non-zero when any run failed. `make test-stress` and `make asan-stress` call it.
set -u
n=20 load= filter= outdir=
while getopts n:l:f:o: opt; do
    case $opt in
        n) n=$OPTARG ;;
        l) load=$OPTARG ;;
        f) filter=$OPTARG ;;
        o) outdir=$OPTARG ;;
        *) echo "usage: sh scripts/stress.sh [-n N] [-l LOAD] [-f FILTER] [-o DIR] TEST_BINARY" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "stress.sh: give the test binary (build/tessera-tests), built; usage: sh scripts/stress.sh [-n N] [-l LOAD] [-f FILTER] [-o DIR] TEST_BINARY" >&2
    exit 2
fi
bin=$1
case $n in ''|*[!0-9]*|0) echo "stress.sh: -n wants a number of runs above 0, not '$n'" >&2; exit 2 ;; esac
cpus=$(nproc 2>/dev/null || echo 2)
[ -n "$load" ] || load=$((2 * cpus))
case $load in ''|*[!0-9]*) echo "stress.sh: -l wants a number of CPU hogs (0 or more), not '$load'" >&2; exit 2 ;; esac
[ -n "$outdir" ] || outdir=$(dirname "$bin")/stress
mkdir -p "$outdir" || exit 1
rm -f "$outdir"/run-*.txt "$outdir"/failures.txt

hogs=
stop_hogs() {
    for h in $hogs; do kill "$h" 2>/dev/null; done
    hogs=
}
trap 'stop_hogs' EXIT
trap 'stop_hogs; exit 130' INT TERM
i=0
while [ "$i" -lt "$load" ]; do
    sh -c 'while :; do :; done' &
    hogs="$hogs $!"
    i=$((i + 1))
done

now() { date +%s; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime; }

echo "# stress: $n runs of $bin${filter:+ (tests matching '$filter')}, $load CPU hogs on $cpus CPUs; load average $(loadavg)"
t_all=$(now)
bad_runs=0
k=1
while [ "$k" -le "$n" ]; do
    out="$outdir/run-$k.txt"
    t0=$(now)
    sh scripts/run-tests.sh "$bin" ${filter:+"$filter"} >"$out" 2>&1
    status=$?
    secs=$(($(now) - t0))
    summary=$(tail -n 1 "$out")
    case $summary in
        *' passed, '*' failed') ;;
        *) summary="no summary line (exit status $status)"; echo "(run ended without its summary line)" >>"$out" ;;
    esac
    # A test's failure: the binary's "FAIL name (file, N ms)" or the manifest checks' "not ok - name: detail".
    sed -n -e 's/^FAIL \([^ ]*\) .*/\1/p' -e 's/^not ok - \([^:]*\).*/\1/p' "$out" >>"$outdir/failures.txt"
    if [ "$status" -ne 0 ]; then
        bad_runs=$((bad_runs + 1))
        grep -q -e '^FAIL ' -e '^not ok - ' "$out" || echo "(run $k: $summary)" >>"$outdir/failures.txt"
    fi
    echo "run $k/$n: $summary, ${secs} s, load average $(loadavg)"
    k=$((k + 1))
done
stop_hogs
total=$(($(now) - t_all))

echo
echo "# failures per test over $n runs ($load CPU hogs on $cpus CPUs)"
if [ -s "$outdir/failures.txt" ]; then
    printf '%-80s %s\n' test "failures/$n"
    sort "$outdir/failures.txt" | uniq -c | sort -rn | while read -r count name; do
        printf '%-80s %s\n' "$name" "$count/$n"
    done
else
    echo "none"
fi
echo "# $((n - bad_runs)) of $n runs passed; total wall time ${total} s (mean $((total / n)) s a run); outputs in $outdir"
[ "$bad_runs" -eq 0 ]

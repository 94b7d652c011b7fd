#!/bin/sh
# topo-compare.sh -- the topology comparison of sim/README.md ("Topology") over several traces:
# for each seed, the trace gen writes with the shipped trace's options (data/sim/topo-trace.json
# is seed 7), replayed on data/sim/topo-cluster.json under each policy; then, per policy, the
# multi-GPU pods summed over the seeds: how many ran unaligned, their mean communication factor, the
# GPU-hours the communication slowdown added (all, and of the unaligned pods), and their mean running
# and completion times.
#
#   scripts/topo-compare.sh [SEEDS] [POLICIES] [extra replay options, e.g. --comm-share 0.1]
#   scripts/topo-compare.sh "1 2 3 4 5 6 7 8" binpack,fgd-pack,fgd,bestfit
set -eu
SIM=${SIM:-build/tessera-sim}
SEEDS=${1:-"1 2 3 4 5 6 7 8"}
POLICIES=${2:-binpack,fgd-pack,fgd,bestfit}
[ $# -gt 2 ] && shift 2 || set --
GEN_OPTS="--workloads 300 --hours 8 --mix training=0.35,inference=0.4,notebook=0.25 --training-sizes 1=0.3,2=0.35,4=0.25,8=0.1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for seed in $SEEDS; do
    # shellcheck disable=SC2086
    "$SIM" gen --seed "$seed" $GEN_OPTS -o "$tmp/trace.json" 2>/dev/null
    "$SIM" replay --cluster data/sim/topo-cluster.json --trace "$tmp/trace.json" --policies "$POLICIES" --no-frag \
        --csv "$@" | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $2 == "all" { print $1, $col["multi_gpu"], $col["multi_unaligned"], $col["comm_extra_gpu_hours"],
                      $col["multi_run_mean_s"], $col["multi_jct_mean_s"], $col["gpu_hours"], $col["comm_factor_mean"],
                      $col["comm_unaligned_gpu_hours"] }' \
        >> "$tmp/rows"
done
echo "seeds: $SEEDS"
awk '{ if (!($1 in n)) order[++k] = $1
       n[$1] += $2; un[$1] += $3; comm[$1] += $4; run[$1] += $2 * $5; jct[$1] += $2 * $6; gh[$1] += $7; f[$1] += $2 * $8; uc[$1] += $9 }
     END { printf "%-12s %7s %9s %7s %11s %10s %10s %10s %9s\n", "policy", "multi", "unaligned", "factor",
                  "comm GPU-h", "unaligned", "run mean h", "JCT mean h", "GPU-h"
           for (i = 1; i <= k; i++) { p = order[i]
               printf "%-12s %7d %9d %6.3fx %11.0f %10.0f %10.2f %10.2f %9.0f\n", p, n[p], un[p], f[p] / n[p],
                      comm[p], uc[p], run[p] / n[p] / 3600, jct[p] / n[p] / 3600, gh[p] } }' "$tmp/rows"

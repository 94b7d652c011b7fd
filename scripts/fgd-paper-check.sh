#!/bin/sh
# The full acceptance check of issue 4: `tessera-sim fgd-paper` on the openb default pod
# list, 6 policies x seeds 42..51; unallocated GPU % at arrived = 100 % must keep the
# authors' order Random > DotProd > {GpuClustering, GpuPacking} > BestFit > FGD and have
# medians within their results (sim/fgd-method.md 5.2). Exits non-zero when out of band.
#
#   make && sh scripts/fgd-paper-check.sh [OUTDIR]
set -eu
BIN=${TESSERA_SIM:-build/tessera-sim}
OUT=${1:-build/fgd-paper-check}
[ -x "$BIN" ] || { echo "fgd-paper-check: $BIN not built (run make)" >&2; exit 2; }
"$BIN" fgd-paper --policies random,dotprod,gpuclustering,gpupacking,bestfit,fgd --seeds 42..51 \
    --pod-lists default --out "$OUT" --no-progress > "$OUT.txt"
cat "$OUT.txt"
# the table rows: policy, median at 100 %, paper, ...
awk '
    BEGIN { want["random"] = 13.75; tol["random"] = 0.6; want["dotprod"] = 9.45; tol["dotprod"] = 0.5
            want["gpuclustering"] = 8.42; tol["gpuclustering"] = 0.6; want["gpupacking"] = 8.20; tol["gpupacking"] = 0.6
            want["bestfit"] = 7.09; tol["bestfit"] = 0.3; want["fgd"] = 4.77; tol["fgd"] = 0.3; bad = 0 }
    ($1 in want) { m[$1] = $2 + 0; seen++ }
    END {
        if (seen != 6) { print "fgd-paper-check: expected 6 policy rows, got " seen; exit 1 }
        for (p in want) {
            d = m[p] - want[p]; if (d < 0) d = -d
            if (d > tol[p]) { printf "OUT OF BAND: %s median %.2f, authors %.2f +- %.1f\n", p, m[p], want[p], tol[p]; bad = 1 }
        }
        if (!(m["random"] > m["dotprod"] && m["dotprod"] > m["gpuclustering"] && m["dotprod"] > m["gpupacking"] &&
              m["gpuclustering"] > m["bestfit"] && m["gpupacking"] > m["bestfit"] && m["bestfit"] > m["fgd"])) {
            print "OUT OF ORDER: expected Random > DotProd > {GpuClustering, GpuPacking} > BestFit > FGD"; bad = 1
        }
        if (bad) exit 1
        print "fgd-paper-check: order and all six medians within the authors\047 bands"
    }' "$OUT.txt"

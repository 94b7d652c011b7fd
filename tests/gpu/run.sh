#!/bin/bash
# tests/gpu/run.sh -- libtessera-cuda.so and MPS limits on a real NVIDIA GPU (tests/gpu/README.md).
# Needs the NVIDIA driver, nvcc (CUDA 12 or 13) and make; nothing of the rest of tessera. Under 5 minutes.
# Builds the shim (make build/libtessera-cuda.so) and tests/gpu/check.cu, lays out a pod's directory as
# `tessera-reserve --install-shim` does, then checks on GPU $GPU (default 0):
#   the share is what cudaMemGetInfo and NVML report; an allocation within it succeeds and one past it fails (cudaMalloc
#   and cudaMallocAsync); two processes of one pod share the limit and a killed one's memory comes back; without
#   TESSERA_GPU_MEMORY_MIB nothing changes; the context memory the shim cannot count (measured, not checked); and, if
#   nvidia-cuda-mps-control is installed, that CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 slows a compute-bound kernel
#   against 100 and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT refuses past its limit.
# Prints a table of figures; exits 1 if a check failed, 2 if it could not run.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GPU=${GPU:-0}
WORK=$(mktemp -d /tmp/tessera-gpu-XXXXXX)
MPS_UP=0
FAILED=0
ROWS=""

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    if [ "$MPS_UP" = 1 ]; then
        echo quit | CUDA_MPS_PIPE_DIRECTORY="$WORK/mps/pipe" nvidia-cuda-mps-control >/dev/null 2>&1
    fi
    [ -n "${HOLDER:-}" ] && kill -9 "$HOLDER" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
die() { echo "tests/gpu/run.sh: $*" >&2; exit 2; }
# row CHECK EXPECTED GOT OK(0/1)
row() {
    local verdict=PASS
    [ "$4" = 1 ] || { verdict=FAIL; FAILED=1; }
    ROWS="$ROWS$(printf '%-46s | %-26s | %-30s | %s' "$1" "$2" "$3" "$verdict")"$'\n'
}
note() { ROWS="$ROWS$(printf '%-46s | %-26s | %-30s | %s' "$1" "-" "$2" "info")"$'\n'; }
# field LINE KEY: the value of KEY=value in LINE
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || die "nvcc not found (on PATH or /usr/local/cuda/bin; or set NVCC)"
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || die "no NVIDIA GPU or driver (nvidia-smi -L fails)"
nvidia-smi -L | sed -n "$((GPU + 1))p" | sed 's/^/GPU under test: /'

echo "building build/libtessera-cuda.so and tests/gpu/check.cu ..."
make -C "$ROOT" -s build/libtessera-cuda.so >"$WORK/make.log" 2>&1 || { cat "$WORK/make.log"; die "make failed"; }
"$NVCC" -O2 -arch=native -o "$WORK/check" "$ROOT/tests/gpu/check.cu" 2>"$WORK/nvcc.log" ||
    "$NVCC" -O2 -o "$WORK/check" "$ROOT/tests/gpu/check.cu" 2>>"$WORK/nvcc.log" || { cat "$WORK/nvcc.log"; die "nvcc failed"; }

# the pod's directory, as tessera-reserve --install-shim writes it (reserve/install.c)
POD="$WORK/pod"
mkdir -p "$POD/lib" "$POD/state" "$WORK/no-mps"
cp "$ROOT/build/libtessera-cuda.so" "$POD/lib/libtessera-cuda.so"
chmod 0555 "$POD/lib/libtessera-cuda.so"
chmod 01777 "$POD/state"
export CUDA_VISIBLE_DEVICES="$GPU"
export CUDA_MPS_PIPE_DIRECTORY="$WORK/no-mps" # never a daemon someone else runs, until the MPS checks
CHECK="$WORK/check"
plain() { timeout 120 "$CHECK" "$@"; }
shimmed() { LD_PRELOAD="$POD/lib/libtessera-cuda.so" TESSERA_GPU_MEMORY_MIB="$SHARE" timeout 120 "$CHECK" "$@"; }

# --- the GPU as it is -------------------------------------------------------------------------------------------
BASE=$(plain info) || die "the check program cannot use the GPU: $BASE"
TOTAL=$(field "$BASE" total)
FREE=$(field "$BASE" free)
note "GPU memory (cudaMemGetInfo, no shim)" "total $TOTAL MiB, free $FREE MiB"
CTX=$(plain context)
note "context memory per process (NVML, uncounted)" "$(field "$CTX" delta) MiB"

# the share: a quarter of what is free, at most 8 GiB
SHARE=$((FREE / 4))
[ "$SHARE" -gt 8192 ] && SHARE=8192
HALF=$((SHARE / 2))
SIXTY=$((SHARE * 6 / 10))
THIRTY=$((SHARE * 3 / 10))
note "share under test (TESSERA_GPU_MEMORY_MIB)" "$SHARE MiB"

# --- what the process is shown ----------------------------------------------------------------------------------
INFO=$(shimmed info 2>"$WORK/err")
T=$(field "$INFO" total); F=$(field "$INFO" free); NT=$(field "$INFO" nvml_total); NF=$(field "$INFO" nvml_free)
row "cudaMemGetInfo total under the shim" "= $SHARE" "$T" "$([ "$T" = "$SHARE" ] && echo 1)"
row "cudaMemGetInfo free under the shim" "<= $SHARE" "$F" "$([ -n "$F" ] && [ "$F" -le "$SHARE" ] && echo 1)"
row "NVML total under the shim" "= $SHARE" "$NT" "$([ "$NT" = "$SHARE" ] && echo 1)"
row "NVML free under the shim" "<= $SHARE" "$NF" "$([ -n "$NF" ] && [ "$NF" -le "$SHARE" ] && echo 1)"

# --- in and over the limit, one process -------------------------------------------------------------------------
OUT=$(shimmed alloc "$HALF" "$SIXTY" 2>"$WORK/err")
row "cudaMalloc $HALF MiB (within)" "ok" "$(printf '%s\n' "$OUT" | sed -n "1s/^alloc $HALF //p")" \
    "$(printf '%s\n' "$OUT" | grep -qx "alloc $HALF ok" && echo 1)"
row "cudaMalloc $SIXTY MiB more (past the share)" "error 2 + tessera: line" \
    "$(printf '%s\n' "$OUT" | sed -n "2s/^alloc $SIXTY //p")" \
    "$(printf '%s\n' "$OUT" | grep -qx "alloc $SIXTY error 2" && grep -q "^tessera: " "$WORK/err" && echo 1)"
OUT=$(shimmed alloc async "$HALF" async "$SIXTY" 2>"$WORK/err")
row "cudaMallocAsync $HALF then $SIXTY MiB" "ok, error 2" "$(printf '%s' "$OUT" | awk '{print $3 $4}' | tr '\n' ' ')" \
    "$(printf '%s\n' "$OUT" | grep -qx "async $HALF ok" && printf '%s\n' "$OUT" | grep -qx "async $SIXTY error 2" &&
       echo 1)"

# --- two processes of one pod -----------------------------------------------------------------------------------
LD_PRELOAD="$POD/lib/libtessera-cuda.so" TESSERA_GPU_MEMORY_MIB="$SHARE" "$CHECK" alloc "$SIXTY" hold 60 \
    >"$WORK/holder" 2>&1 &
HOLDER=$!
for _ in $(seq 300); do grep -q holding "$WORK/holder" && break; sleep 0.1; done
OUT=$(shimmed alloc "$HALF" "$THIRTY" 2>"$WORK/err")
row "2nd process: $HALF MiB while $SIXTY held" "error 2" "$(printf '%s\n' "$OUT" | sed -n "1s/^alloc $HALF //p")" \
    "$(printf '%s\n' "$OUT" | grep -qx "alloc $HALF error 2" && echo 1)"
row "2nd process: $THIRTY MiB while $SIXTY held" "ok" "$(printf '%s\n' "$OUT" | sed -n "2s/^alloc $THIRTY //p")" \
    "$(printf '%s\n' "$OUT" | grep -qx "alloc $THIRTY ok" && echo 1)"
kill -9 "$HOLDER"; wait "$HOLDER" 2>/dev/null; HOLDER=""
OUT=$(shimmed alloc "$SIXTY" 2>"$WORK/err")
row "after the holder is killed: $SIXTY MiB" "ok" "$(printf '%s\n' "$OUT" | sed -n "1s/^alloc $SIXTY //p")" \
    "$(printf '%s\n' "$OUT" | grep -qx "alloc $SIXTY ok" && echo 1)"

# --- no share: nothing changes ----------------------------------------------------------------------------------
INFO=$(LD_PRELOAD="$POD/lib/libtessera-cuda.so" timeout 120 "$CHECK" info)
row "preloaded without a share: total" "= $TOTAL" "$(field "$INFO" total)" \
    "$([ "$(field "$INFO" total)" = "$TOTAL" ] && echo 1)"

# --- MPS --------------------------------------------------------------------------------------------------------
if command -v nvidia-cuda-mps-control >/dev/null; then
    mkdir -p "$WORK/mps/pipe" "$WORK/mps/log"
    export CUDA_MPS_PIPE_DIRECTORY="$WORK/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$WORK/mps/log"
    # the daemon is given the one GPU; its clients then see it as device 0 and must not be given
    # CUDA_VISIBLE_DEVICES themselves (NVIDIA's MPS documentation: the server renumbers)
    if nvidia-cuda-mps-control -d && MPS_UP=1 && sleep 1 && [ -e "$WORK/mps/pipe/nvidia-cuda-mps-control.pid" ]; then
        unset CUDA_VISIBLE_DEVICES
        C100=$(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100 plain compute 20)
        C25=$(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 plain compute 20)
        MS100=$(field "$C100" ms); MS25=$(field "$C25" ms)
        note "MPS 100 percent: kernel time, SMs shown" "${MS100:-?} ms, $(field "$C100" sms) SMs"
        note "MPS 25 percent: kernel time, SMs shown" "${MS25:-?} ms, $(field "$C25" sms) SMs"
        SLOW=$(awk -v a="${MS25:-0}" -v b="${MS100:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "0" }')
        row "MPS 25 percent slows the kernel" ">= 2.0 x" "$SLOW x" \
            "$(awk -v s="$SLOW" 'BEGIN { exit !(s >= 2.0) }' && echo 1)"
        OUT=$(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=1024M" plain alloc 512 1024)
        row "MPS pinned limit 1024M: 512 then 1024 MiB" "ok, error 2" "$(printf '%s' "$OUT" | awk '{print $3}' | tr '\n' ' ')" \
            "$(printf '%s\n' "$OUT" | grep -qx "alloc 512 ok" && printf '%s\n' "$OUT" | grep -qx "alloc 1024 error 2" &&
               echo 1)"
        OUT=$(shimmed alloc "$HALF" "$SIXTY" 2>"$WORK/err")
        row "MPS client under the shim: $HALF, $SIXTY MiB" "ok, error 2" "$(printf '%s' "$OUT" | awk '{print $3}' | tr '\n' ' ')" \
            "$(printf '%s\n' "$OUT" | grep -qx "alloc $HALF ok" && printf '%s\n' "$OUT" | grep -qx "alloc $SIXTY error 2" &&
               echo 1)"
    else
        row "MPS control daemon starts" "started" "$(tail -n 2 "$WORK/mps/log/control.log" 2>/dev/null)" 0
    fi
else
    note "MPS checks" "not run: no nvidia-cuda-mps-control"
fi

printf '\n%-46s | %-26s | %-30s | %s\n' "check" "expected" "got" "result"
printf '%s\n' "-----------------------------------------------+----------------------------+--------------------------------+-------"
printf '%s' "$ROWS"
[ "$FAILED" = 0 ] && echo "all checks passed" || echo "SOME CHECKS FAILED"
exit "$FAILED"

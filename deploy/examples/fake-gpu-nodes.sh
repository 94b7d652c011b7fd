#!/bin/sh
# Make five nodes of a test cluster without GPUs (kind, minikube) look like the GPU nodes the
# examples need, so that every example pod can be scheduled by tessera end to end:
#
#   sh deploy/examples/fake-gpu-nodes.sh WHOLE_NODE TIMESLICE_NODE MPS_NODE MIG_NODE LAYERED_NODE
#   sh deploy/examples/fake-gpu-nodes.sh --undo NODE...
#
# Each node gets the labels GPU feature discovery would publish and, in status.capacity, the
# resources the NVIDIA device plugin would advertise under the configurations of
# device-plugin-config.yaml (rename on, MIG mixed). No device plugin runs on such a node, so
# the kubelet treats the resources as plain extended resources: it admits the pods, and the
# busybox examples run; the CUDA examples are scheduled but fail to start (no driver).
# Never run this on a node with real GPUs. tests/deploy/check_manifests.py reads the "fake"
# lines below and checks that tessera places every example pod on the node meant for it.
set -eu

# fake NODE PRODUCT GPU_COUNT MEMORY_MIB SHARING_STRATEGY REPLICAS MIG_STRATEGY RESOURCE=N... [+LABEL=VALUE...]
# (a "+" item is one more GFD label, e.g. a MIG profile's replicas under layered sharing)
fake() {
    node=$1 product=$2 count=$3 mem=$4 sharing=$5 replicas=$6 mig=$7
    shift 7
    kubectl label node "$node" --overwrite nvidia.com/gpu.present=true nvidia.com/gpu.product="$product" \
        nvidia.com/gpu.count="$count" nvidia.com/gpu.memory="$mem" nvidia.com/gpu.sharing-strategy="$sharing" \
        nvidia.com/gpu.replicas="$replicas" ${mig:+nvidia.com/mig.strategy=$mig}
    ops=""
    for r in "$@"; do
        case "$r" in
        +*) kubectl label node "$node" --overwrite "${r#+}"; continue ;;
        esac
        ops="$ops{\"op\":\"add\",\"path\":\"/status/capacity/$(echo "${r%%=*}" | sed 's|/|~1|')\",\"value\":\"${r#*=}\"},"
    done
    kubectl patch node "$node" --subresource=status --type=json -p "[${ops%,}]"
}

undo() {
    node=$1
    kubectl label node "$node" nvidia.com/gpu.present- nvidia.com/gpu.product- nvidia.com/gpu.count- \
        nvidia.com/gpu.memory- nvidia.com/gpu.sharing-strategy- nvidia.com/gpu.replicas- nvidia.com/mig.strategy- \
        nvidia.com/mig-1g.10gb.replicas- nvidia.com/mig-1g.10gb.sharing-strategy- nvidia.com/mig-1g.10gb.product- || true
    for r in nvidia.com~1gpu nvidia.com~1gpu.shared nvidia.com~1mig-3g.40gb nvidia.com~1mig-1g.10gb; do
        kubectl patch node "$node" --subresource=status --type=json \
            -p "[{\"op\":\"remove\",\"path\":\"/status/capacity/$r\"}]" 2>/dev/null || true
    done
}

if [ "${1:-}" = "--undo" ]; then
    shift
    for n in "$@"; do undo "$n"; done
    exit 0
fi
[ $# -eq 5 ] || { echo "usage: $0 WHOLE_NODE TIMESLICE_NODE MPS_NODE MIG_NODE LAYERED_NODE | --undo NODE..." >&2; exit 2; }

# pod-whole-gpus, pod-gpumem, pod-gpu-fraction, pod-gpu-fraction-mps, pod-isolated-fraction, pod-gpu-models, pod-soft-share-check, quota-team-a: two unshared A100 80GB
fake "$1" NVIDIA-A100-SXM4-80GB 2 81920 none 1 "" nvidia.com/gpu=2
# pod-timeslice: two T4s time-sliced 4 ways, renamed to nvidia.com/gpu.shared
fake "$2" Tesla-T4 2 15360 time-slicing 4 "" nvidia.com/gpu=0 nvidia.com/gpu.shared=8
# pod-mps: two T4s shared by MPS with 4 clients each, renamed to nvidia.com/gpu.shared
fake "$3" Tesla-T4 2 15360 mps 4 "" nvidia.com/gpu=0 nvidia.com/gpu.shared=8
# pod-mig: one H100 80GB split by MIG (mixed strategy) into two 3g.40gb instances
fake "$4" NVIDIA-H100-80GB-HBM3 1 81920 none 1 mixed nvidia.com/gpu=0 nvidia.com/mig-3g.40gb=2
# layered sharing (device-plugin-config.yaml key mig-timesliced): 28 replicas under the name nvidia.com/mig-1g.10gb
# pod-mig-timeslice: one H100 80GB as 7 x 1g.10gb (mixed strategy), each instance time-sliced 4 ways
fake "$5" NVIDIA-H100-80GB-HBM3 1 81920 none 1 mixed nvidia.com/gpu=0 nvidia.com/mig-1g.10gb=28 +nvidia.com/mig-1g.10gb.replicas=4 +nvidia.com/mig-1g.10gb.sharing-strategy=time-slicing +nvidia.com/mig-1g.10gb.product=NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED

# tessera build. `make` builds everything; `make run` runs the demo; `make test` runs every
# test and ends with "N passed, N failed"; `make asan` runs the same tests under
# AddressSanitizer and UBSan; `make test-stress N=20 LOAD=4` runs the suite 20 times beside 4
# busy CPU hogs and counts failures per test. Missing Debian packages are installed when run as root.

CC      ?= gcc
PKGS    := libmicrohttpd libcjson libcurl
BUILD   ?= build
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
OPT     ?= -O2 -g
SAN     ?=
DEPFLAGS = -MMD -MP

# pkg-config is asked only after the dependency check has run (see $(BUILD)/.deps).
# GnuTLS is a build dependency (scripts/deps.sh installs it): the webhook's self-signed CA
# and serving certificate (extender/certs.c) and --tls-client-ca use it. A build without it
# still compiles (EXT_HAVE_GNUTLS unset): then the webhook needs --webhook-cert/--webhook-key
# and --tls-client-ca is refused.
GNUTLS_PKG = $(shell pkg-config --exists gnutls 2>/dev/null && echo gnutls)
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) $(GNUTLS_PKG) 2>/dev/null) $(if $(GNUTLS_PKG),-DEXT_HAVE_GNUTLS)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) $(GNUTLS_PKG) 2>/dev/null)
# jemalloc replaces malloc; sanitizer builds keep the sanitizer's allocator instead.
ifeq ($(SAN),)
MALLOC_LIBS = $(shell pkg-config --libs jemalloc 2>/dev/null)
endif

CFLAGS  := $(CSTD) $(WARN) $(OPT) $(SAN) -I. $(EXTRA_CFLAGS)
LDLIBS   = $(PKG_LIBS) $(MALLOC_LIBS) -lm -lpthread

MODEL_SRC  := $(wildcard model/*.c)
POLICY_SRC := $(wildcard policy/*.c)
SIM_SRC    := $(filter-out sim/main.c,$(wildcard sim/*.c))
EXT_SRC    := $(filter-out extender/main.c,$(wildcard extender/*.c extender/*/*.c))
# kube/: the Kubernetes client layer under the extender, the node agent and tessera-reserve (kube/README.md):
# configuration and credentials, the HTTP client, list+watch, PATCH, Leases, the log line. Linked into all three.
KUBE_SRC   := $(wildcard kube/*.c)
BENCH_SRC  := $(wildcard tests/bench/*.c)
# agent/: tessera-node-agent, the node-side program that publishes a GPU node's topology and holdings. Its library
# (all but main.c): NVML, the topology annotation, the Node client, the kubelet Pod Resources client (podresources.c,
# protowire.c) and the holdings record; the tests, benches and fuzzers link it. It links kube/ (the API client and
# the log line), neither extender/ nor model/.
AGENT_LIB_SRC := $(filter-out agent/main.c,$(wildcard agent/*.c))
# reserve/: tessera-reserve, the node-side program of a reservation pod; device.c is pure and unit-tested.
RESERVE_LIB_SRC := reserve/device.c reserve/install.c
# mps.c: --mps, the GPU's MPS control daemon (a child process; tests run it against the fake daemon).
RESERVE_LIB_SRC += reserve/mps.c
# shim/: libtessera-cuda.so, the library preloaded into a soft share's processes (shim/shim.c). Its own layer: it
# links only libc and libdl. The tests link its ledger and allocation table too, to test them in-process.
SHIM_SRC := $(wildcard shim/*.c) shim/dlsym.S
SHIM_TESTED_SRC := shim/ledger.c shim/track.c
# Not part of the tests' binary: the fake libnvidia-ml.so.1 and libcuda.so.1, the CUDA probe and the RTLD_NEXT
# test library, the fake nvidia-cuda-mps-control (below).
SUPPORT_NOT_LINKED := tests/support/fake_nvml.c tests/support/fake_cuda.c tests/support/cuda_probe.c \
                      tests/support/preload_wrap.c tests/support/fake_mps_control.c
SUPPORT_SRC := $(filter-out $(SUPPORT_NOT_LINKED),$(wildcard tests/support/*.c))
# tests/fuzz/fuzz_targets.c: the fuzz target bodies, replayed over their corpora by the unit tests.
TEST_SRC   := $(wildcard tests/unit/*.c) $(SUPPORT_SRC) $(RESERVE_LIB_SRC) $(AGENT_LIB_SRC) $(SHIM_TESTED_SRC) \
              tests/fuzz/fuzz_targets.c
GEN_SRC    := $(BUILD)/gen/catalog_data.c

LIB_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(MODEL_SRC) $(POLICY_SRC)) $(BUILD)/gen/catalog_data.o
# the demo cluster (the extender's --demo, tessera-sim demo) and its pods
EXT_DATA_OBJ := $(BUILD)/gen/demo_cluster_data.o $(BUILD)/gen/demo_pods_data.o
DEMO_OBJ := $(EXT_DATA_OBJ)
# the openb node list and default pod list, compiled in for tessera-sim fgd-paper and convert
DEMO_OBJ += $(BUILD)/gen/openb_nodes_data.o $(BUILD)/gen/openb_default_data.o
# the tessera-sim replay/plan demo cluster and trace (data/sim/)
DEMO_OBJ += $(BUILD)/gen/sim_demo_cluster_data.o $(BUILD)/gen/sim_demo_trace_data.o
SIM_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(SIM_SRC))
EXT_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(EXT_SRC))
KUBE_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(KUBE_SRC))
TEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))

SIM_BIN  := $(BUILD)/tessera-sim
EXT_BIN  := $(BUILD)/tessera-extender
RESERVE_BIN := $(BUILD)/tessera-reserve
AGENT_BIN := $(BUILD)/tessera-node-agent
# The fake NVML the agent's tests put on LD_LIBRARY_PATH, in a directory of its own so nothing else is found there.
FAKE_NVML := $(BUILD)/fake-nvml/libnvidia-ml.so.1
SHIM_LIB := $(BUILD)/libtessera-cuda.so
# The fake driver, the CUDA probe (two builds: the driver dlopen'ed, and linked) and the RTLD_NEXT test library,
# in a directory of their own: tests put it on LD_LIBRARY_PATH and find nothing else there.
FAKE_CUDA_DIR := $(BUILD)/fake-cuda
FAKE_CUDA := $(FAKE_CUDA_DIR)/libcuda.so.1
CUDA_PROBE := $(FAKE_CUDA_DIR)/tessera-cuda-probe
PRELOAD_WRAP := $(FAKE_CUDA_DIR)/libwrap-uname.so
FAKE_CUDA_ALL := $(FAKE_CUDA) $(CUDA_PROBE) $(CUDA_PROBE)-linked $(PRELOAD_WRAP)
TEST_BIN := $(BUILD)/tessera-tests
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

.PHONY: all run sim test asan asan-build test-stress asan-stress bench clean deps fuzz fuzz-build
all: $(EXT_BIN) $(RESERVE_BIN) $(AGENT_BIN) $(SIM_BIN) $(TEST_BIN) $(FAKE_NVML) $(SHIM_LIB) $(FAKE_CUDA_ALL)

deps: $(BUILD)/.deps
$(BUILD)/.deps: scripts/deps.sh
	@mkdir -p $(BUILD)
	@sh scripts/deps.sh
	@touch $@

# V=1 shows the full commands.
Q := $(if $(V),,@)

$(BUILD)/%.o: %.c $(BUILD)/.deps
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(PKG_CFLAGS) $(DEPFLAGS) -c $< -o $@

# Data files are compiled in (as NUL-terminated byte arrays), so the binaries never
# read the data directory at run time. $(call embed,json-file,symbol)
define embed
	@mkdir -p $(dir $@)
	@{ echo '/* generated from $(1) by the Makefile; do not edit */'; \
	   echo '#include <stddef.h>'; \
	   echo 'const unsigned char $(2)[] = {'; \
	   od -An -v -tx1 $(1) | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	   echo '0x00};'; \
	   echo 'const size_t $(2)_len = sizeof($(2)) - 1;'; } > $@
endef

$(BUILD)/gen/catalog_data.c: data/gpus.json
	$(call embed,$<,model_catalog_json)
$(BUILD)/gen/demo_cluster_data.c: data/demo-cluster.json
	$(call embed,$<,sim_demo_cluster_json)
$(BUILD)/gen/demo_pods_data.c: data/demo-pods.json
	$(call embed,$<,sim_demo_pods_json)
$(BUILD)/gen/sim_demo_cluster_data.c: data/sim/demo-cluster.json
	$(call embed,$<,sim_demo_sim_cluster_json)
$(BUILD)/gen/sim_demo_trace_data.c: data/sim/demo-trace.json
	$(call embed,$<,sim_demo_sim_trace_json)

$(BUILD)/gen/openb_nodes_data.c: data/openb/openb_node_list_gpu_node.csv
	$(call embed,$<,sim_openb_nodes_csv)
$(BUILD)/gen/openb_default_data.c: data/openb/openb_pod_list_default.csv
	$(call embed,$<,sim_openb_default_csv)

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libtessera.a: $(LIB_OBJ)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(SIM_BIN): $(BUILD)/sim/main.o $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(BUILD)/sim/main.o $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a $(LDLIBS)

# The extender carries only the demo cluster (deploy/Containerfile copies just that data).
$(EXT_BIN): $(BUILD)/extender/main.o $(EXT_OBJ) $(KUBE_OBJ) $(EXT_DATA_OBJ) $(BUILD)/libtessera.a
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(BUILD)/extender/main.o $(EXT_OBJ) $(KUBE_OBJ) $(EXT_DATA_OBJ) $(BUILD)/libtessera.a $(LDLIBS)

# tessera-reserve needs only kube/ (one PATCH, the log line).
RESERVE_OBJ := $(BUILD)/reserve/main.o $(patsubst %.c,$(BUILD)/%.o,$(RESERVE_LIB_SRC)) $(KUBE_OBJ)
$(RESERVE_BIN): $(RESERVE_OBJ)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(RESERVE_OBJ) $(LDLIBS)

# tessera-node-agent: libcurl, cJSON and libmicrohttpd; NVML is dlopen'ed at run time (agent/nvml.h), hence -ldl.
AGENT_OBJ := $(BUILD)/agent/main.o $(patsubst %.c,$(BUILD)/%.o,$(AGENT_LIB_SRC)) $(KUBE_OBJ)
$(AGENT_BIN): $(AGENT_OBJ)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(AGENT_OBJ) $(LDLIBS) -ldl

# Built without the sanitizers: it is loaded into the agent with dlopen, and the agent's own build decides those.
# It models memory in use on the fake driver's node with the shim's ledger (tests/support/fake_gpu.h).
$(FAKE_NVML): tests/support/fake_nvml.c tests/support/fake_gpu.h shim/ledger.c shim/ledger.h $(BUILD)/.deps
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CSTD) $(WARN) -O2 -g -I. -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $< shim/ledger.c

# libtessera-cuda.so: never with the sanitizers (it is preloaded into other programs), and needing only a C compiler
# (no dependency check: tests/gpu/run.sh builds it on GPU machines that have nothing else). -fvisibility=hidden: it
# exports only its hooks and dlsym; -Bsymbolic-functions: its own references to its hooks are its own, whatever
# else is preloaded; libdl.so.2 named explicitly: before glibc 2.34 dlopen/dlsym live there, and a program that
# does not link it would leave the shim's references unresolved (tests/unit/test_shim.c checks the versions).
$(SHIM_LIB): $(SHIM_SRC) $(wildcard shim/*.h)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CSTD) $(WARN) -O2 -g -I. -fPIC -shared -fvisibility=hidden -Wl,-Bsymbolic-functions \
	    -Wl,-soname,libtessera-cuda.so -o $@ $(SHIM_SRC) -Wl,--no-as-needed -l:libdl.so.2

# The fake driver (tests/support/fake_cuda.c): -Bsymbolic-functions as the real driver, whose cuGetProcAddress hands
# out its own functions even when an interposer exports the same names.
$(FAKE_CUDA): tests/support/fake_cuda.c tests/support/fake_gpu.h shim/ledger.c $(wildcard shim/*.h) $(BUILD)/.deps
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CSTD) $(WARN) -O2 -g -I. -fPIC -shared -Wl,-Bsymbolic-functions -Wl,-soname,libcuda.so.1 -o $@ \
	    $< shim/ledger.c -lpthread
$(CUDA_PROBE): tests/support/cuda_probe.c $(wildcard shim/*.h) $(BUILD)/.deps
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CSTD) $(WARN) -O2 -g -I. -o $@ $< -ldl -Wl,-rpath,'$$ORIGIN'
$(CUDA_PROBE)-linked: tests/support/cuda_probe.c $(FAKE_CUDA) $(wildcard shim/*.h)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CSTD) $(WARN) -O2 -g -I. -DPROBE_LINKED -o $@ $< -L$(FAKE_CUDA_DIR) -l:libcuda.so.1 -ldl \
	    -Wl,-rpath,'$$ORIGIN'
$(PRELOAD_WRAP): tests/support/preload_wrap.c $(BUILD)/.deps
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CSTD) $(WARN) -O2 -g -fPIC -shared -o $@ $< -ldl

# The fake NVIDIA MPS control daemon: tests put $(BUILD)/fake-cuda/bin on PATH, where tessera-reserve --mps finds it
# as it finds the real one the NVIDIA container runtime mounts. Built with the build's own flags (sanitizers
# included): it is a program, not a library loaded into another.
FAKE_MPS := $(BUILD)/fake-cuda/bin/nvidia-cuda-mps-control
all: $(FAKE_MPS)
$(FAKE_MPS): $(BUILD)/tests/support/fake_mps_control.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $<

# libyaml: the tests read deploy/'s manifests themselves (tests/support/yaml_json.c), to start tessera as
# deploy/ runs it. libnghttp2: the fake kubelet Pod Resources gRPC server (tests/support/fake_podresources.c).
# Only the tests and benches link them; the programs do not.
TEST_LIBS = $(shell pkg-config --libs yaml-0.1 2>/dev/null || echo -lyaml) \
            $(shell pkg-config --libs libnghttp2 2>/dev/null || echo -lnghttp2)

# The unit tests link every library object (model, policy, extender, sim) but no main().
$(TEST_BIN): $(TEST_OBJ) $(EXT_OBJ) $(KUBE_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(EXT_OBJ) $(KUBE_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a $(LDLIBS) $(TEST_LIBS) -ldl

# Each tests/bench/NAME.c is a program of its own; `make bench` builds and runs them all.
# Benches may use the fake API server (tests/support); bench_extender runs the real binary.
BENCH_SUPPORT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(SUPPORT_SRC) $(AGENT_LIB_SRC))
$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(EXT_OBJ) $(KUBE_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BENCH_SUPPORT_OBJ) $(BUILD)/libtessera.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(EXT_OBJ) $(KUBE_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BENCH_SUPPORT_OBJ) $(BUILD)/libtessera.a $(LDLIBS) $(TEST_LIBS)
$(BUILD)/bench/bench_extender: $(EXT_BIN)

# The main job: the extender on the embedded demo cluster, until Ctrl-C.
run: $(EXT_BIN)
	$(EXT_BIN) --demo

# The simulator demo on the bundled cluster and trace (data/sim/): the smallest cluster
# meeting two service targets per policy, comparing sharing options (layered MIG +
# time-slicing among them), then a replay of the bundled cluster, then multi-GPU training
# on PCIe servers (data/sim/topo-*.json); seconds.
# the topology comparison: tessera's topology-aware policies against the FGD paper's fgd and bestfit
SIM_TOPO_POLICIES := binpack,fgd-pack,fgd,bestfit
sim: $(SIM_BIN)
	@$(SIM_BIN) plan --target "wait.p95.inference<=30s" --target "unschedulable==0" --policies fgd,bestfit,binpack,spread \
	    --sharing-options whole,timeslice:4,mig:on-demand,mig:3g.40gb+4g.40gb,mig:3g.40gb+4g.40gb+timeslice:4 \
	    --svg $(BUILD)/sim-plan.svg
	@echo
	@$(SIM_BIN) replay --svg $(BUILD)/sim-replay.svg --alloc-svg $(BUILD)/sim-alloc.svg
	@echo
	@echo "multi-GPU training on PCIe servers (issue 22): unaligned placements and training time per policy"
	@$(SIM_BIN) replay --cluster data/sim/topo-cluster.json --trace data/sim/topo-trace.json \
	    --policies $(SIM_TOPO_POLICIES)

bench: $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; $$b || exit 1; done

# Unit and end-to-end tests, then the deployment manifest checks and the layer check (scripts/check-layers.py:
# every #include points down a layer, no include circle); the last line sums them all.
# The restart test runs the real extender binary, and test_reserve the real tessera-reserve, built next to the tests;
# the manifest checks run tessera-sim's sweep Job; the node agent's tests run tessera-node-agent on the fake NVML.
# Several tests run at once (TEST_JOBS, default 3 per CPU; scripts/run-tests.sh); TEST_JOBS=1 runs them one by one.
TEST_PROGRAMS := $(TEST_BIN) $(EXT_BIN) $(RESERVE_BIN) $(AGENT_BIN) $(FAKE_NVML) $(SIM_BIN) $(SHIM_LIB) \
                 $(FAKE_CUDA_ALL) $(FAKE_MPS)
test: $(TEST_PROGRAMS)
	@sh scripts/run-tests.sh $(TEST_BIN)

ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
asan-build:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -g" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	    build-asan/tessera-tests build-asan/tessera-extender build-asan/tessera-reserve \
	    build-asan/tessera-node-agent build-asan/fake-nvml/libnvidia-ml.so.1 build-asan/libtessera-cuda.so \
	    build-asan/fake-cuda/libcuda.so.1 build-asan/fake-cuda/tessera-cuda-probe \
	    build-asan/fake-cuda/tessera-cuda-probe-linked build-asan/fake-cuda/libwrap-uname.so \
	    build-asan/fake-cuda/bin/nvidia-cuda-mps-control
asan: asan-build
	@$(ASAN_ENV) sh scripts/run-tests.sh build-asan/tessera-tests

# The suite N times with LOAD CPU hogs beside it (default twice the CPUs), then a table of failures per test
# and the wall time (scripts/stress.sh): `make test-stress N=20 LOAD=4`; FILTER=NAME runs only those C tests.
# Each run's output is kept in build/stress/ (build-asan/stress/ for asan-stress).
N ?= 20
stress_args = -n $(N) $(if $(LOAD),-l $(LOAD)) $(if $(FILTER),-f '$(FILTER)')
test-stress: $(TEST_PROGRAMS)
	@sh scripts/stress.sh $(stress_args) $(TEST_BIN)
asan-stress: asan-build
	@$(ASAN_ENV) sh scripts/stress.sh $(stress_args) build-asan/tessera-tests

# Fuzzing (tests/fuzz/README.md): libFuzzer binaries built with clang, ASan and UBSan into
# build-fuzz/, each run for FUZZ_SECONDS. Only this target needs clang (scripts/fuzz.sh
# installs it); `make` and `make test` never do.
FUZZ_SECONDS ?= 10
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(filter-out tests/fuzz/fuzz_targets.c,$(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BIN := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))
FUZZ_LIB_OBJ := $(BUILD)/tests/fuzz/fuzz_targets.o $(patsubst %.c,$(BUILD)/%.o,$(RESERVE_LIB_SRC) $(AGENT_LIB_SRC))
$(BUILD)/fuzz/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ) $(EXT_OBJ) $(KUBE_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJ) $(EXT_OBJ) $(KUBE_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a $(LDLIBS)
fuzz-build: $(FUZZ_BIN)
# keep the wrappers' objects (intermediates of the pattern rule above) so a rebuild is a no-op
.SECONDARY: $(patsubst %,$(BUILD)/tests/fuzz/fuzz_%.o,$(FUZZ_TARGETS))

fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh scripts/fuzz.sh $(FUZZ)

clean:
	rm -rf build build-asan build-fuzz build-fuzz2

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

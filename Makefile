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
BENCH_SRC  := $(wildcard tests/bench/*.c)
# agent/: tessera-node-agent, the node-side program that publishes a GPU node's topology and holdings. Its library
# (all but main.c): NVML, the topology annotation, the Node client, the kubelet Pod Resources client (podresources.c,
# protowire.c) and the holdings record; the tests, benches and fuzzers link it. It links neither extender/ nor model/.
AGENT_LIB_SRC := $(filter-out agent/main.c,$(wildcard agent/*.c))
# reserve/: tessera-reserve, the node-side program of a reservation pod; device.c is pure and unit-tested.
RESERVE_LIB_SRC := reserve/device.c
# tests/support/fake_nvml.c is not part of the tests' binary: it is the fake libnvidia-ml.so.1 (below).
SUPPORT_SRC := $(filter-out tests/support/fake_nvml.c,$(wildcard tests/support/*.c))
# tests/fuzz/fuzz_targets.c: the fuzz target bodies, replayed over their corpora by the unit tests.
TEST_SRC   := $(wildcard tests/unit/*.c) $(SUPPORT_SRC) $(RESERVE_LIB_SRC) $(AGENT_LIB_SRC) \
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
TEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))

SIM_BIN  := $(BUILD)/tessera-sim
EXT_BIN  := $(BUILD)/tessera-extender
RESERVE_BIN := $(BUILD)/tessera-reserve
AGENT_BIN := $(BUILD)/tessera-node-agent
# The fake NVML the agent's tests put on LD_LIBRARY_PATH, in a directory of its own so nothing else is found there.
FAKE_NVML := $(BUILD)/fake-nvml/libnvidia-ml.so.1
TEST_BIN := $(BUILD)/tessera-tests
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

.PHONY: all run sim test asan asan-build test-stress asan-stress bench clean deps fuzz fuzz-build
all: $(EXT_BIN) $(RESERVE_BIN) $(AGENT_BIN) $(SIM_BIN) $(TEST_BIN) $(FAKE_NVML)

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
$(EXT_BIN): $(BUILD)/extender/main.o $(EXT_OBJ) $(EXT_DATA_OBJ) $(BUILD)/libtessera.a
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(BUILD)/extender/main.o $(EXT_OBJ) $(EXT_DATA_OBJ) $(BUILD)/libtessera.a $(LDLIBS)

# tessera-reserve needs only the API client (kube.c, one PATCH; it reports to health.c) and the log line format
# of the extender.
RESERVE_OBJ := $(BUILD)/reserve/main.o $(patsubst %.c,$(BUILD)/%.o,$(RESERVE_LIB_SRC)) \
               $(BUILD)/extender/mirror/kube.o $(BUILD)/extender/health.o $(BUILD)/extender/log.o
$(RESERVE_BIN): $(RESERVE_OBJ)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(RESERVE_OBJ) $(LDLIBS)

# tessera-node-agent: libcurl, cJSON and libmicrohttpd; NVML is dlopen'ed at run time (agent/nvml.h), hence -ldl.
AGENT_OBJ := $(BUILD)/agent/main.o $(patsubst %.c,$(BUILD)/%.o,$(AGENT_LIB_SRC))
$(AGENT_BIN): $(AGENT_OBJ)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(AGENT_OBJ) $(LDLIBS) -ldl

# Built without the sanitizers: it is loaded into the agent with dlopen, and the agent's own build decides those.
$(FAKE_NVML): tests/support/fake_nvml.c $(BUILD)/.deps
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CSTD) $(WARN) -O2 -g -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $<

# libyaml: the tests read deploy/'s manifests themselves (tests/support/yaml_json.c), to start tessera as
# deploy/ runs it. libnghttp2: the fake kubelet Pod Resources gRPC server (tests/support/fake_podresources.c).
# Only the tests and benches link them; the programs do not.
TEST_LIBS = $(shell pkg-config --libs yaml-0.1 2>/dev/null || echo -lyaml) \
            $(shell pkg-config --libs libnghttp2 2>/dev/null || echo -lnghttp2)

# The unit tests link every library object (model, policy, extender, sim) but no main().
$(TEST_BIN): $(TEST_OBJ) $(EXT_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(TEST_OBJ) $(EXT_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a $(LDLIBS) $(TEST_LIBS) -ldl

# Each tests/bench/NAME.c is a program of its own; `make bench` builds and runs them all.
# Benches may use the fake API server (tests/support); bench_extender runs the real binary.
BENCH_SUPPORT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(SUPPORT_SRC) $(AGENT_LIB_SRC))
$(BUILD)/bench/%: $(BUILD)/tests/bench/%.o $(EXT_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BENCH_SUPPORT_OBJ) $(BUILD)/libtessera.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(EXT_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BENCH_SUPPORT_OBJ) $(BUILD)/libtessera.a $(LDLIBS) $(TEST_LIBS)
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

# Unit and end-to-end tests, then the deployment manifest checks; the last line sums both.
# The restart test runs the real extender binary, and test_reserve the real tessera-reserve, built next to the tests;
# the manifest checks run tessera-sim's sweep Job; the node agent's tests run tessera-node-agent on the fake NVML.
# Several tests run at once (TEST_JOBS, default 3 per CPU; scripts/run-tests.sh); TEST_JOBS=1 runs them one by one.
TEST_PROGRAMS := $(TEST_BIN) $(EXT_BIN) $(RESERVE_BIN) $(AGENT_BIN) $(FAKE_NVML) $(SIM_BIN)
test: $(TEST_PROGRAMS)
	@sh scripts/run-tests.sh $(TEST_BIN)

ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
asan-build:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -g" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	    build-asan/tessera-tests build-asan/tessera-extender build-asan/tessera-reserve \
	    build-asan/tessera-node-agent build-asan/fake-nvml/libnvidia-ml.so.1
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
$(BUILD)/fuzz/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ) $(EXT_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJ) $(EXT_OBJ) $(SIM_OBJ) $(DEMO_OBJ) $(BUILD)/libtessera.a $(LDLIBS)
fuzz-build: $(FUZZ_BIN)
# keep the wrappers' objects (intermediates of the pattern rule above) so a rebuild is a no-op
.SECONDARY: $(patsubst %,$(BUILD)/tests/fuzz/fuzz_%.o,$(FUZZ_TARGETS))

fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh scripts/fuzz.sh $(FUZZ)

clean:
	rm -rf build build-asan build-fuzz build-fuzz2

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

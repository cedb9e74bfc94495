# shardcast — build, test, bench, run.
#
#   make run     install what is missing, build, simulate scenarios/default.ini
#   make test    install what is missing, build, run every test
#   make check   the tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make bench   speed targets of the simulator, and the step model against
#                published throughputs (make published)
#   make snapshots  rewrite tests/snapshots/ (simulate/recommend of every shipped scenario)
#   make deps    install the Debian packages shardcast needs (idempotent)
#   make slurm-test  install Slurm and munge (make slurm-deps), run tests/slurm.sh
#   make pyref-deps  the two PyTorch stacks of the reference (build/pyref/current, build/pyref/1.13)
#   make pyref-test  the tracer's tests and the reference grid (needs pyref-deps)
#   make fuzz    the libFuzzer harnesses of fuzz/, FUZZ_SECONDS each (clang)

# ---- settings ---------------------------------------------------------------
CC       ?= cc
NVCC     ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
MPICC    ?= mpicc
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
            -Wmissing-prototypes -Wpointer-arith -Wformat=2 -Wundef -Wvla
CPPFLAGS += -Isim/core -Isim/inputs -Isim/models -Isim/drivers -Isim/cmd -Iruntime -Icuda -I$(BUILD)/gen -MMD -MP
# The libraries whose -dev packages ship an archive are linked statically: each
# shared library costs a process its mapping, relocation and page faults, and
# bin/simulate's start-up with them was 0.6 ms of its 4 ms (make bench:
# bench_process). Debian has no libcjson.a; libc and libm stay shared.
LDLIBS_STATIC := -lyaml -lsqlite3 -lgsl -lgslcblas -linih
LDLIBS   := -lcjson -Wl,-Bstatic $(LDLIBS_STATIC) -Wl,-Bdynamic -lm
# bin/simulate, one answer per process, is linked wholly statically (libc and
# libm too) where make deps could build libcjson.a from Debian's source of the
# installed libcjson-dev (scripts/cjson_static.sh): with no shared library to
# map and relocate, a whole process of the 175B bench took 1.73 ms instead of
# 2.10 (bench_process, side by side). Else, and where SIMULATE_STATIC is
# empty (the sanitizer build: ASan needs the dynamic loader), it links as the
# others. The linker's warning about dlopen in a static program is SQLite's
# loadable extensions, which shardcast never loads.
CJSON_STATIC    := build/cjson
SIMULATE_STATIC ?= 1
SIMULATE_LDLIBS  = $(if $(and $(SIMULATE_STATIC),$(wildcard $(CJSON_STATIC)/libcjson.a)),\
                   -static $(CJSON_STATIC)/libcjson.a $(LDLIBS_STATIC) -lm,$(LDLIBS))
# MPI (Open MPI from Debian): flags from its compiler wrapper, used by runtime/ only
MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell $(MPICC) --showme:link 2>/dev/null)
# CUDA: built when nvcc is found (kernels, the cuda backend, bin/gpu_tests)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
NVCCFLAGS ?= -O3 -std=c++17 $(NVCC_ARCH) -Xcompiler -Wall,-Wextra
ifneq ($(NVCC),)
CUDA_CFLAGS := -Icuda -isystem $(CUDA_HOME)/include
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lnccl -lcudart -lstdc++
endif
BUILD    ?= build
BIN      ?= bin
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Debian packages: header or tool -> package
DEPS_PKGS := libinih-dev libsqlite3-dev sqlite3 libgsl-dev libcriterion-dev gnuplot-nox \
             libopenmpi-dev openmpi-bin libcjson-dev libyaml-dev jq dpkg-dev
# a one-node Slurm cluster for tests/slurm.sh (make slurm-deps; .ci/run)
SLURM_PKGS := slurmctld slurmd slurm-client munge
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# fuzzing (make fuzz): clang 14 with its sanitizer and libFuzzer runtimes
FUZZ_PKGS := clang-14 libclang-rt-14-dev llvm-14
FUZZ_CC   ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_HARNESSES := scenario hf accel ds sweep
FUZZ_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
              -fno-sanitize-recover=undefined
# The PyTorch reference (runtime/pytorch): the current stack from PyPI in a venv,
# the older one Debian's python3-torch 1.13 with transformers of its time
PYREF      := build/pyref
PYREF_CUR  := torch==2.15.0 transformers==5.23.0
PYREF_OLD  := transformers==4.26.1

# ---- sources ----------------------------------------------------------------
SIM_LIB_SRCS := sim/core/err.c sim/core/units.c sim/core/cfg.c sim/inputs/catalog.c sim/inputs/model.c sim/inputs/hw.c \
                sim/inputs/scenario.c sim/models/plan.c sim/models/graph.c sim/models/life.c sim/drivers/predict.c sim/drivers/report.c sim/drivers/store.c \
                sim/core/evq.c sim/models/coll.c sim/models/des.c sim/models/compute.c sim/models/eager.c sim/models/step.c \
                sim/inputs/import.c sim/inputs/import_hf.c sim/inputs/import_accel.c sim/inputs/import_ds.c sim/drivers/launch.c \
                sim/drivers/results.c sim/models/profile.c sim/models/memwalk.c sim/models/memstrat.c sim/models/memfsdp2.c sim/models/memory.c sim/models/emu.c \
                sim/models/failures.c sim/models/ckpt.c sim/models/job.c sim/models/jobrun.c sim/drivers/record.c sim/models/calib.c \
                sim/drivers/sweep.c sim/drivers/sweep_eval.c sim/drivers/sweep_out.c sim/models/alloc.c sim/core/progress.c sim/models/memrun.c sim/core/heap.c \
                sim/models/period.c sim/models/wrap.c
SIMULATE_SRCS := sim/cmd/simulate_main.c
RESULTS_SRCS := sim/cmd/results_main.c
BENCH_STEP_SRCS := bench/bench_step.c
TEST_SRCS := tests/test_units.c tests/test_loader.c tests/test_params.c tests/test_graph.c tests/test_eager.c \
             tests/test_store.c tests/test_coll.c tests/test_step.c \
             tests/test_import.c tests/test_launch.c tests/test_results.c tests/test_memory.c \
             tests/test_job.c tests/test_runtime.c tests/test_reference.c tests/test_grid.c \
             tests/test_cuda.c tests/test_gemm.c tests/test_sweep.c tests/test_alloc.c \
             tests/test_ckpt.c tests/test_calib.c tests/test_plan.c tests/test_periodic.c
# the real runtime (host side and the cpu backend)
RT_LIB_SRCS := runtime/arena.c runtime/backend_cpu.c runtime/model_rt.c runtime/strategy.c runtime/stratfsdp2.c \
               runtime/rtckpt.c runtime/search.c runtime/pyref.c runtime/pyref_cache.c cuda/gemm.c
ifneq ($(NVCC),)
RT_LIB_SRCS += runtime/backend_cuda.c
CUDA_SRCS := cuda/kernels.cu
CUDA_C_SRCS := cuda/cstep.c
else
RT_LIB_SRCS += runtime/backend_cuda_none.c
endif
GPU_TEST_SRCS := tests/gpu_tests.c
VALIDATE_SRCS := runtime/validate_main.c
RT_MPI_TEST_SRCS := tests/rt_mpi_main.c

SIM_LIB_OBJS := $(SIM_LIB_SRCS:%.c=$(BUILD)/%.o)
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/%.o)
LIB := $(BUILD)/libshardcast.a
RT_LIB_OBJS := $(RT_LIB_SRCS:%.c=$(BUILD)/%.o) $(CUDA_SRCS:%.cu=$(BUILD)/%.o) $(CUDA_C_SRCS:%.c=$(BUILD)/%.o)
RT_LIB := $(BUILD)/libshardcast_rt.a

.PHONY: all test check bench run deps clean readme-keys gpu-test plots run-only test-only bench-only plots-only \
        published published-only readme-published pyref-deps pyref-test slurm-deps slurm-test slurm-test-only \
        host-overhead snapshots snapshots-only fuzz fuzz-deps fuzz-bins clang-build
all: $(BIN)/simulate $(BIN)/results $(BIN)/validate $(BIN)/recommend

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -c $< -o $@

# results/schema.sql compiled in as a C string
$(BUILD)/gen/schema_sql.h: results/schema.sql
	@mkdir -p $(dir $@)
	{ echo 'static const char schema_sql[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/  "/' -e 's/$$/\\n"/' $<; echo ';'; } > $@
$(BUILD)/sim/drivers/store.o: $(BUILD)/gen/schema_sql.h

$(BUILD)/runtime/%.o: runtime/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(MPI_CFLAGS) $(CUDA_CFLAGS) $(WARN) $(CFLAGS) -c $< -o $@

$(BUILD)/cuda/%.o: cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) -Isim/core -Isim/inputs -Isim/models -Isim/drivers -Isim/cmd -Iruntime -Icuda -MMD -MP $(NVCCFLAGS) -c $< -o $@

$(BUILD)/cuda/%.o: cuda/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CUDA_CFLAGS) $(WARN) $(CFLAGS) -c $< -o $@

$(BUILD)/tests/gpu_tests.o $(BUILD)/bench/gpu_bench.o: CPPFLAGS += $(MPI_CFLAGS) $(CUDA_CFLAGS)

$(RT_LIB): $(RT_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BIN)/validate: $(BUILD)/runtime/validate_main.o $(RT_LIB) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(MPI_LIBS) $(CUDA_LIBS) -lpthread

$(BIN)/rt_mpi_test: $(BUILD)/tests/rt_mpi_main.o $(RT_LIB) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(MPI_LIBS) $(CUDA_LIBS) -lpthread

# training throughput with the CUDA kernels (bench/gpu_bench.c)
$(BIN)/gpu_bench: $(BUILD)/bench/gpu_bench.o $(RT_LIB) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(MPI_LIBS) $(CUDA_LIBS) -lpthread

# every CUDA kernel against the cpu reference (prints SKIP without a GPU)
$(BIN)/gpu_tests: $(BUILD)/tests/gpu_tests.o $(RT_LIB) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(MPI_LIBS) $(CUDA_LIBS) -lpthread

$(LIB): $(SIM_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BIN)/simulate: $(BUILD)/sim/cmd/simulate_main.o $(LIB) $(wildcard $(CJSON_STATIC)/libcjson.a)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $(BUILD)/sim/cmd/simulate_main.o $(LIB) $(SIMULATE_LDLIBS)

# recommend links Open MPI (mpicc); without mpirun it runs as a world of one
$(BUILD)/sim/cmd/recommend_main.o: sim/cmd/recommend_main.c $(BUILD)/gen/heatmap_gp.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CPPFLAGS) $(WARN) $(CFLAGS) -c $< -o $@

$(BIN)/recommend: $(BUILD)/sim/cmd/recommend_main.o $(LIB)
	@mkdir -p $(BIN)
	$(MPICC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# results/plots/heatmap.gp compiled in (recommend --plot)
$(BUILD)/gen/heatmap_gp.h: results/plots/heatmap.gp
	@mkdir -p $(dir $@)
	{ echo 'static const char heatmap_gp[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/  "/' -e 's/$$/\\n"/' $<; echo ';'; } > $@

$(BIN)/results: $(BUILD)/sim/cmd/results_main.o $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/bench_memory: $(BUILD)/bench/bench_memory.o $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/bench_recommend: $(BUILD)/bench/bench_recommend.o $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/bench_simulate: $(BUILD)/bench/bench_simulate.o $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# a whole bin/simulate process, timed from outside (no library of ours)
$(BIN)/bench_process: $(BUILD)/bench/bench_process.o
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^

$(BIN)/bench_step: $(BENCH_STEP_SRCS:%.c=$(BUILD)/%.o) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# a results-store writer for tests/recommend.sh (crash and concurrency tests)
$(BIN)/store_writer: $(BUILD)/tests/store_writer.o $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/unit_tests: $(TEST_OBJS) $(RT_LIB) $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ -lcriterion $(LDLIBS) $(MPI_LIBS) $(CUDA_LIBS) -lpthread

# ---- fuzzing ----------------------------------------------------------------
# The harnesses (fuzz/fuzz_*.c) link the sim library built with clang into its
# own folders: make BUILD=build-fuzz BIN=bin-fuzz CC=clang-14 CFLAGS=... fuzz-bins
$(BIN)/fuzz_%: $(BUILD)/fuzz/fuzz_%.o $(BUILD)/fuzz/fuzz_common.o $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

fuzz-bins: $(FUZZ_HARNESSES:%=$(BIN)/fuzz_%)

# ---- user targets -----------------------------------------------------------
# $(call apt_install,NAME,PACKAGES,APT-OPTIONS): install those not installed yet
define apt_install
@missing=""; for p in $(2); do \
  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
done; \
if [ -n "$$missing" ]; then \
  echo "$(1): installing$$missing"; \
  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(3) $$missing >/dev/null \
    || { echo "$(1): apt-get failed"; exit 1; }; \
else echo "$(1): all present ✓"; fi
endef

deps:
	$(call apt_install,deps,$(DEPS_PKGS),)
	@scripts/cjson_static.sh $(CJSON_STATIC)

# Slurm's daemons, clients and munge, without the recommended extras; their
# services are not used (tests/slurm.sh starts its own). srun --mpi=pmix loads
# libpmix.so, which libopenmpi-dev (make deps) brings with libpmix-dev.
slurm-deps:
	$(call apt_install,slurm-deps,$(SLURM_PKGS),--no-install-recommends)

fuzz-deps: deps
	$(call apt_install,fuzz-deps,$(FUZZ_PKGS),)

# Each harness runs FUZZ_SECONDS over its committed corpus (fuzz/corpus/NAME);
# what it finds goes to build-fuzz/ (fuzz/run.sh says where).
fuzz: fuzz-deps
	@$(MAKE) --no-print-directory BUILD=build-fuzz BIN=bin-fuzz CC=$(FUZZ_CC) \
	  CFLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link" fuzz-bins
	fuzz/mkdict.sh
	fuzz/run.sh bin-fuzz $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

# the build under clang with warnings as errors (CI: gcc and clang both clean)
clang-build: fuzz-deps
	@OMPI_CC=$(FUZZ_CC) $(MAKE) --no-print-directory BUILD=build-clang BIN=bin-clang CC=$(FUZZ_CC) \
	  CFLAGS="-O2 -g -Werror" \
	  all bin-clang/unit_tests bin-clang/store_writer bin-clang/rt_mpi_test

# The user targets install first and then build in a second make, so that the
# flags read from the installed tools (mpicc --showme) exist on a clean machine.
run: deps
	@$(MAKE) --no-print-directory run-only
run-only: all
	$(BIN)/simulate scenarios/default.ini

test: deps
	@$(MAKE) --no-print-directory test-only
test-only: all $(BIN)/unit_tests $(BIN)/rt_mpi_test $(BIN)/store_writer $(if $(NVCC),$(BIN)/gpu_tests $(BIN)/gpu_bench)
	tests/paths.sh
	$(BIN)/unit_tests --jobs 2
	tests/golden.sh $(BIN)
	tests/mpi.sh $(BIN)
	tests/validate.sh $(BIN)
	tests/store.sh $(BIN)
	tests/recommend.sh $(BIN)
	tests/published.sh $(BIN)
	tests/snapshots.sh $(BIN)
	tests/slurm.sh $(BIN)
	@echo "pyref: the PyTorch reference grid was skipped (it needs the stacks: make pyref-deps pyref-test)"
	@if [ -n "$(NVCC)" ]; then $(BIN)/gpu_tests; else echo "gpu_tests: not built (✗ nvcc not found)"; fi

# validate.sbatch under a real one-node Slurm (a skip is a failure here)
slurm-test: deps slurm-deps
	@$(MAKE) --no-print-directory slurm-test-only
slurm-test-only: all
	SHARDCAST_REQUIRE_SLURM=1 tests/slurm.sh $(BIN)

pyref-deps:
	@[ -x $(PYREF)/current/bin/python ] && $(PYREF)/current/bin/python -c 'import torch, transformers' 2>/dev/null \
	  || { echo "pyref-deps: current stack ($(PYREF_CUR)) into $(PYREF)/current"; \
	       python3 -m venv $(PYREF)/current && $(PYREF)/current/bin/pip install -q $(PYREF_CUR); }
	@dpkg-query -W -f='$${Status}' python3-torch 2>/dev/null | grep -q "install ok installed" \
	  || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq python3-torch python3-venv >/dev/null; }
	@[ -x $(PYREF)/1.13/bin/python ] && $(PYREF)/1.13/bin/python -c 'import torch, transformers' 2>/dev/null \
	  || { echo "pyref-deps: older stack (Debian python3-torch, $(PYREF_OLD)) into $(PYREF)/1.13"; \
	       /usr/bin/python3 -m venv --system-site-packages $(PYREF)/1.13 && $(PYREF)/1.13/bin/pip install -q $(PYREF_OLD); }
	@echo "pyref-deps: $$($(PYREF)/current/bin/python -c 'import torch, transformers as t; print("torch", torch.__version__, "transformers", t.__version__)'); $$($(PYREF)/1.13/bin/python -c 'import torch, transformers as t; print("torch", torch.__version__, "transformers", t.__version__)') ✓"

# the tracer's unit tests (both stacks) and the reference grid
pyref-test: $(BIN)/validate
	cd runtime/pytorch && ../../$(PYREF)/current/bin/python -m unittest test_pyref
	cd runtime/pytorch && ../../$(PYREF)/1.13/bin/python -m unittest test_pyref
	tests/pyref_grid.sh $(BIN)
	tests/pyref_grid.sh $(BIN) tests/pyref/fsdp2.txt  # FSDP2 (fully_shard), current stack

# rewrite the whole-scenario snapshots on purpose (review and commit the diff)
snapshots: deps
	@$(MAKE) --no-print-directory snapshots-only
snapshots-only: $(BIN)/simulate $(BIN)/recommend
	tests/snapshots.sh $(BIN) --update

# the CUDA kernels against the cpu reference on this machine's GPU
gpu-test: $(if $(NVCC),$(BIN)/gpu_tests $(BIN)/gpu_bench,no-nvcc)
	$(BIN)/gpu_tests
no-nvcc:
	@echo "gpu-test: nvcc not found (set NVCC=/path/to/nvcc)"; exit 1

check: deps
	$(MAKE) BUILD=build-san BIN=bin-san CFLAGS="-O1 -g $(SAN)" LDFLAGS="$(SAN)" SIMULATE_STATIC= \
	  bin-san/simulate bin-san/results bin-san/unit_tests bin-san/validate bin-san/recommend bin-san/store_writer
	ASAN_OPTIONS=detect_leaks=1 bin-san/unit_tests --jobs 1
	tests/golden.sh bin-san
	tests/store.sh bin-san
	ASAN_OPTIONS=detect_leaks=0 tests/recommend.sh bin-san  # Open MPI's own allocations are not ours

bench: deps
	@$(MAKE) --no-print-directory bench-only
bench-only: all $(BIN)/bench_step $(BIN)/bench_memory $(BIN)/bench_job $(BIN)/bench_recommend $(BIN)/bench_simulate $(BIN)/bench_process
	$(BIN)/bench_simulate bench/gpt3-175b-3072.ini
	$(BIN)/bench_process $(BIN)/simulate bench/gpt3-175b-3072.ini
	$(BIN)/bench_memory scenarios/gpt3-175b-zero3.ini
	$(BIN)/bench_step
	$(BIN)/bench_job
	$(BIN)/bench_recommend bench/sweep.ini
	$(BIN)/bench_recommend bench/sweep-1m.ini 1
	bench/published.sh $(BIN)

# the step model against published throughputs (scenarios/published/table.csv)
published: deps
	@$(MAKE) --no-print-directory published-only
published-only: $(BIN)/simulate
	bench/published.sh $(BIN)

# the host side of eager PyTorch (efficiency.ini's dispatch_* figures), measured
# on this CPU with PyPI's torch and transformers in a venv under build/ (not
# part of make test: the wheels are large)
HOST_VENV := $(BUILD)/venv-host
host-overhead:
	@[ -x $(HOST_VENV)/bin/python ] || { python3 -m venv $(HOST_VENV) && \
	  $(HOST_VENV)/bin/pip install --quiet torch transformers; }
	$(HOST_VENV)/bin/python bench/host_overhead.py --model gpt2 --layers 12 --steps 7

# regenerate README.md's published-throughput table from the harness
readme-published: $(BIN)/simulate
	@bench/published.sh $(BIN) --markdown > README.published.new && \
	 { sed '/<!-- published:begin -->/q' README.md; cat README.published.new; \
	   sed -n '/<!-- published:end -->/,$$p' README.md; } > README.md.new && mv README.md.new README.md; \
	 rc=$$?; rm -f README.published.new; exit $$rc

# the gnuplot scripts of results/plots rendered from the results database
# (the shipped sweeps are recorded into it first when it has no recommend run)
PLOTS_DB ?= results/results.db
plots: deps
	@$(MAKE) --no-print-directory plots-only
plots-only: all
	results/plots/render.sh $(BIN) $(PLOTS_DB) results/out/plots

# regenerate README.md's key reference from the loader's table
readme-keys: $(BIN)/simulate
	@{ sed '/<!-- keys:begin -->/q' README.md; $(BIN)/simulate --keys; \
	   sed -n '/<!-- keys:end -->/,$$p' README.md; } > README.md.new && mv README.md.new README.md

$(BIN)/bench_job: $(BUILD)/bench/bench_job.o $(LIB)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

clean:
	rm -rf build build-san bin bin-san build-fuzz bin-fuzz build-clang bin-clang

-include $(SIM_LIB_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(BUILD)/sim/cmd/simulate_main.d \
         $(BUILD)/sim/cmd/results_main.d $(BUILD)/bench/bench_step.d $(BUILD)/bench/bench_memory.d \
         $(BUILD)/bench/bench_job.d $(RT_LIB_OBJS:.o=.d) $(BUILD)/runtime/validate_main.d \
         $(BUILD)/tests/rt_mpi_main.d $(BUILD)/tests/gpu_tests.d $(BUILD)/bench/gpu_bench.d \
         $(CUDA_SRCS:%.cu=$(BUILD)/%.d) $(BUILD)/sim/cmd/recommend_main.d $(BUILD)/bench/bench_recommend.d $(BUILD)/bench/bench_simulate.d $(BUILD)/bench/bench_process.d \
         $(BUILD)/tests/store_writer.d $(wildcard $(BUILD)/fuzz/*.d)

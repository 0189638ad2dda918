# Tiller developer entry points. Each target installs what is missing first
# (scripts/setup.sh is idempotent and fast when nothing is missing).
#   make demo   export BERT-Base with Paddle, run it with Tiller, compare
#   make test   build, then every C++ (ctest) and Python (pytest) test, then the
#               C++ tests of the portable build under each ISA cap, under
#               AddressSanitizer/UBSan, those of code
#               that threads share under ThreadSanitizer, and each fuzz target
#               for 60 s (TILLER_FUZZ_SECONDS)
#   make build  configure and build only
#   make portable   build for x86-64-v3 (the wheel's level, per-ISA kernels
#               chosen at start-up) and run the C++ tests under each
#               TILLER_MAX_ISA (avx2, avx512, native), and its kernel tests
#               under QEMU's Haswell (AVX2 only)
#   make asan   build with AddressSanitizer/UBSan and run the C++ tests
#   make tsan   build with ThreadSanitizer and run the C++ tests of shared-thread code
#   make fuzz   build the fuzz targets (clang, libFuzzer) and run each FUZZ_SECONDS (60);
#               FUZZ_RUNS=1000000 ends each after that many executions instead
#   make bench / bench-train   inference / training benchmarks against Paddle (training: and PyTorch)
#   make bench-zoo             every zoo model at batch 1 and 8 vs Paddle Inference and ONNX Runtime
#   make bench-int8            BERT-Base and ResNet-50 quantized by Paddle vs Paddle int8 and ORT int8
PY      := $(CURDIR)/.venv/bin/python
BUILD   := build
JOBS    ?= $(shell nproc)
# ccache keys on paths relative to the checkout, so clones share the cache.
export CCACHE_BASEDIR := $(CURDIR)
# Builds with debug info (asan, tsan, fuzz) would otherwise hash the checkout's
# path and miss in every fresh clone; CMakeLists.txt maps paths in objects to
# relative ones, which makes sharing them safe.
export CCACHE_NOHASHDIR := 1
CMAKE_ARGS := -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(PY)

.PHONY: setup build build-portable portable build-asan build-tsan build-fuzz fuzz test test-cpp test-python demo bench bench-train bench-zoo bench-int8 bench-mpi asan tsan clean

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) $(CMAKE_ARGS) > $(BUILD).configure.log 2>&1 || (cat $(BUILD).configure.log; exit 1)
	@ninja -C $(BUILD) -j $(JOBS)

test-cpp: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-python: build
	@TILLER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) -m pytest -q tests/python

test: build build-portable build-asan build-tsan build-fuzz
	@$(PY) scripts/run_tests.py

demo: build
	@TILLER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) scripts/pretrain_demo.py
	@TILLER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) scripts/demo.py

bench: build
	@TILLER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) bench/bench_inference.py

bench-zoo: build
	@TILLER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) bench/bench_zoo.py

bench-int8: build
	@TILLER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) bench/bench_int8.py

bench-mpi: build
	@TILLER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) bench/bench_mpi.py

bench-train: build
	@bash scripts/setup_torch.sh
	@TILLER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) bench/bench_training.py

# The portable build: every object for x86-64-v3 as the wheel's, the
# AVX-512 copies of the kernels picked at start-up where the CPU has it.
build-portable: setup
	@cmake -S . -B build-portable $(CMAKE_ARGS) -DTILLER_ARCH=x86-64-v3 -DTILLER_BUILD_PYTHON=OFF > build-portable.configure.log 2>&1 || (cat build-portable.configure.log; exit 1)
	@ninja -C build-portable -j $(JOBS)

portable: build-portable
	@for cap in avx2 avx512 native; do echo "== TILLER_MAX_ISA=$$cap"; (cd build-portable && TILLER_MAX_ISA=$$cap ctest --output-on-failure -j $(JOBS)) || exit 1; done
	@echo "== the kernel tests under qemu-x86_64 -cpu Haswell-noTSX (AVX2 only)"
	@ONEDNN_MAX_CPU_ISA=AVX OMP_NUM_THREADS=1 qemu-x86_64 -cpu Haswell-noTSX build-portable/bin/tiller_tests --gtest_filter='$(shell $(PY) -c "import sys; sys.path.insert(0, 'scripts'); import run_tests; print(run_tests.QEMU_TESTS)")'

build-asan: setup
	@# Debug (-O0) compiles about twice as fast as -O3, and the tests are small.
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPython3_EXECUTABLE=$(PY) -DTILLER_SANITIZE=ON -DTILLER_BUILD_PYTHON=OFF > build-asan.configure.log 2>&1 || (cat build-asan.configure.log; exit 1)
	@ninja -C build-asan -j $(JOBS) tiller_tests tiller_api_tests

asan: build-asan
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

build-tsan: setup
	@cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPython3_EXECUTABLE=$(PY) -DTILLER_TSAN=ON -DTILLER_BUILD_PYTHON=OFF > build-tsan.configure.log 2>&1 || (cat build-tsan.configure.log; exit 1)
	@ninja -C build-tsan -j $(JOBS) tiller_tests

# Fuzz targets (fuzz/*_fuzzer.cc) with clang's libFuzzer, ASan and UBSan;
# `make fuzz` makes the seed corpora from models Paddle exports and runs each
# target FUZZ_SECONDS (scripts/fuzz.py prints the executions).
FUZZ_SECONDS ?= 60
build-fuzz:
	@TILLER_SETUP_FUZZ=1 bash scripts/setup.sh
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=$(PY) -DTILLER_FUZZ=ON -DTILLER_BUILD_PYTHON=OFF -DTILLER_BUILD_TESTS=OFF > build-fuzz.configure.log 2>&1 || (cat build-fuzz.configure.log; exit 1)
	@ninja -C build-fuzz -j $(JOBS) program_desc_fuzzer pir_json_fuzzer params_fuzzer pickle_fuzzer npy_fuzzer ipu_config_fuzzer model_fuzzer

FUZZ_RUNS ?= 0
fuzz: build-fuzz
	@$(PY) scripts/fuzz.py --build build-fuzz --seconds $(if $(filter 0,$(FUZZ_RUNS)),$(FUZZ_SECONDS),86400) --runs $(FUZZ_RUNS)

tsan: build-tsan
	@cd build-tsan && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) build-portable build-asan build-tsan build-fuzz *.configure.log

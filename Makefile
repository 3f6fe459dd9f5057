# Thin wrapper around CMake. The two quick-start commands are `make demo` and `make test`.
#   make deps    install missing Debian packages (scripts/deps.sh)
#   make build   configure + build the Release tree in build/
#   make debug   configure + build the Debug tree in build-debug/
#   make test    deps + build + every test (ctest), then the sanitizer suites (asan, tsan) and
#                the fuzz targets for TEST_FUZZ_SECONDS each (default 30); about 25 minutes on 2
#                cores (a fresh clone at load 1-7: 25 min 22 s; stage times: docs/reliability.md,
#                "CI time"); fails on any failure or report. Every ctest run starts the longest
#                entries first (COST in tests/CMakeLists.txt, one table for the Release tree, one
#                for the sanitizer trees), so that no long suite is left running alone at the end
#                of a stage
#   make demo    deps + build + the main job on a built-in model
#   make asan    the test programs and what their entries run (target tests_all: no bench/
#                programs, no libmixrt.so), then every test, with AddressSanitizer/UBSan in
#                build-asan/ (sanitizer builds compile at -O1: -O0 makes the suites several times
#                slower; their tests see MIXRT_SANITIZED, and a few long loops run a smaller case
#                that takes the same paths, see tests/CMakeLists.txt); zoo_models
#                reuses the models $(BUILD)/zoo already holds instead of exporting them again
#   make tsan    the concurrency-labelled suites (and the mixrt program they drive), built and
#                run with ThreadSanitizer in build-tsan/
#   make fuzz    build the libFuzzer targets with clang (build-fuzz/) and run each for
#                FUZZ_SECONDS (default 60) on seed corpora (fuzz/run.sh; docs/reliability.md)
#   make bench-deps  Node.js, npm, gnuplot and the pinned onnxruntime-node (scripts/bench-deps.sh)
#   make bench   build + bench-deps + mixrt bench llm (JSON and table in build/) + the plot
#   make format  the C sources through .clang-format (needs clang-format: apt-get install clang-format)
#   make clean   remove the build trees

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 60
TEST_FUZZ_SECONDS ?= 30

.PHONY: all deps build debug test demo asan tsan fuzz clean bench-deps bench format

all: build

deps:
	@sh scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

debug: deps
	cmake -S . -B build-debug -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build build-debug -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory asan
	$(MAKE) --no-print-directory tsan
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)

demo: build
	./$(BUILD)/tools/mixrt demo

# zoo_models exports the PyTorch models once: into the Release tree's $(BUILD)/zoo when that
# export exists (after `make build` + ctest, as in `make test`), else into build-asan/zoo.
asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMIXRT_SANITIZE=address \
	    -DMIXRT_ZOO_DIR=$(CURDIR)/$(if $(wildcard $(BUILD)/zoo/manifest.json),$(BUILD),build-asan)/zoo $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS) --target tests_all
	cd build-asan && ctest --output-on-failure -j $(JOBS)

tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DMIXRT_SANITIZE=thread $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS) --target tests_concurrency
	cd build-tsan && ctest --output-on-failure -j $(JOBS) -L concurrency

fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(JOBS) sh fuzz/run.sh

bench-deps:
	@sh scripts/bench-deps.sh

bench: build bench-deps
	./$(BUILD)/tools/mixrt bench llm --table $(BUILD)/bench-llm.dat > $(BUILD)/bench-llm.json
	gnuplot -e "data='$(BUILD)/bench-llm.dat'; out='$(BUILD)/llm_latency.png'" bench/plot/llm_latency.gp
	@echo "bench: $(BUILD)/bench-llm.json, $(BUILD)/bench-llm.dat, $(BUILD)/llm_latency.png"

format:
	git ls-files '*.c' '*.h' '*.inc' ':!tests/data' | xargs clang-format -i

clean:
	rm -rf build build-debug build-asan build-tsan build-fuzz

# The two entry points (see README): `make train` and `make test`. CI adds `make sanitize` and
# `make fuzz` (SECURITY.md).
PYTHON ?= python3
BUILD_DIR ?= build
CMAKE_ARGS ?=
JOBS ?= $(shell nproc)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
export PYTHONPATH := $(CURDIR)/python$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: all deps test-deps build train test test-cpp test-python bench sanitize fuzz clean

all: build

deps:
	@PYTHON=$(PYTHON) scripts/install_deps.sh

# PyTorch for the comparison tests, onnx + onnxruntime for kiln.onnx's, out of the environment
# (KILN_TEST_TORCH=0 / KILN_TEST_ONNX=0 skip them).
test-deps:
	@PYTHON=$(PYTHON) scripts/install_test_torch.sh
	@PYTHON=$(PYTHON) scripts/install_test_onnx.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release \
	  -DPython_EXECUTABLE=$$(command -v $(PYTHON)) $(CMAKE_ARGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

train: build
	@echo "== build done; training (the result is the last line) =="
	$(PYTHON) examples/train_digits.py

test: build test-deps test-cpp test-python

test-cpp:
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

test-python:
	$(PYTHON) -m pytest -q tests/python

# AddressSanitizer + UBSan build in build-asan, C++ suite and a Python subset on it
# (Note [Sanitizer build] in scripts/sanitize.sh).
sanitize: deps
	PYTHON=$(PYTHON) JOBS=$(JOBS) scripts/sanitize.sh

# libFuzzer targets for the file and wire parsers, FUZZ_SECONDS each (scripts/fuzz.sh).
FUZZ_SECONDS ?= 30
fuzz: build
	KILN_FUZZ_DEPS=1 PYTHON=$(PYTHON) scripts/install_deps.sh
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) scripts/fuzz.sh

bench: build
	$(PYTHON) benchmarks/cpu_overhead.py

clean:
	rm -rf $(BUILD_DIR) build-asan build-fuzz python/kiln/*.so

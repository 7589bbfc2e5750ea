#!/usr/bin/env bash
# The project's two entry points (see README.md), runnable on a fresh Debian 12 machine:
#   cmake/tracemod.sh demo   installs what is missing, builds and runs the main demo
#   cmake/tracemod.sh test   installs what is missing, builds and runs the tests (g++, -march=native;
#                            those of graphs, passes, save/load and bad input only in the sanitizer
#                            step), the kernel tests once more with clang for AVX2 + FMA, the demo and
#                            a short benchmark run, then the tests under AddressSanitizer +
#                            UndefinedBehaviorSanitizer, and the libFuzzer targets for 30 s;
#                            docs/build.md lists what each part costs
#   cmake/tracemod.sh bench  builds and runs the benchmarks (extra arguments go to Google Benchmark)
#   cmake/tracemod.sh bench-ort [--batch B] [--rounds R] [--runs N] [model ...]  times tracemod
#                            next to ONNX Runtime (from npm) on the same ONNX files (docs/build.md)
#   cmake/tracemod.sh zoo [model ...]  exports torchvision's families with PyTorch and checks their
#                            ONNX import against PyTorch's outputs (docs/onnx.md, "The model zoo")
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ clang cmake ninja-build libboost-dev xtensor-dev libxsimd-dev doctest-dev libbenchmark-dev nlohmann-json3-dev
          libonnx-dev libprotobuf-dev libonnx-testdata)  # the last three: tracemod::onnx and its tests

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "== installing: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

jobs=$(nproc)

fuzz_packages=(clang-14 libclang-rt-14-dev)  # libFuzzer and the sanitizer runtimes of clang 14
test_packages=(python3)  # test_graph reads the profiler's Chrome trace back with json.tool
zoo_packages=(python3-torch python3-torchvision)  # the zoo's exports (tests/reference/zoo_export.py)
# ONNX Runtime's side of bench-ort: npm (Debian's, unless a node.js that brings its own is installed)
ort_packages=(nodejs npm)

# run_fuzzer <target> <seconds> <corpus dir> <seed dirs...>: one libFuzzer run, its output in
# build/fuzz/<target>.log and its exit status in build/fuzz/<target>.status.
run_fuzzer() {
  local target=$1 seconds=$2 status=0
  shift 2
  mkdir -p "$1"
  ./build/fuzz/tests/"$target" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 "$@" \
    > build/fuzz/"$target".log 2>&1 || status=$?
  echo "$status" > build/fuzz/"$target".status
}

# run_fuzzers <seconds> [registries flags]: builds only the libFuzzer targets (clang 14, -O1, libFuzzer +
# ASan + UBSan; the registries' object with the extra flags given, -O0 in the test command):
# fuzz_load, fuzz_npy and, when tracemod::onnx is built, fuzz_onnx, and runs them on their seed corpora
# for that long in all, one process per core: fuzz_load for the whole time on one; fuzz_npy (a small
# parser, covered in seconds) for a third of it, then fuzz_onnx (seeded with the models of ONNX's
# backend node tests) for the rest on the other. A crash, a leak, a sanitizer report or an input over
# the memory limit ends a fuzzer with a non-zero status, and this script with it.
run_fuzzers() {
  local seconds=$1 registries_flags=${2:-} onnx_tests=/usr/share/libonnx-testdata/data/node
  configure build/fuzz -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DCMAKE_CXX_COMPILER=clang++-14 -DTRACEMOD_FUZZ=ON -DTRACEMOD_NATIVE=OFF \
    -DTRACEMOD_FUZZ_REGISTRIES_FLAGS="$registries_flags" \
    -DTRACEMOD_BUILD_EXAMPLES=OFF -DTRACEMOD_BUILD_BENCH=OFF -DTRACEMOD_INSTALL=OFF
  local targets=(fuzz_load fuzz_npy)
  # (grep reads all of ninja's list: under pipefail, grep -q could fail the pipe by closing it early)
  if ninja -C build/fuzz -t targets all | grep '^fuzz_onnx:' >/dev/null && [ -d "$onnx_tests" ]; then
    targets+=(fuzz_onnx)
  fi
  cmake --build build/fuzz -j "$jobs" --target "${targets[@]}"
  rm -f build/fuzz/*.status
  run_fuzzer fuzz_load "$seconds" build/fuzz/corpus/load tests/data/serialize &
  local first=$!
  if [ ${#targets[@]} -eq 3 ]; then
    mkdir -p build/fuzz/seeds/onnx
    for dir in "$onnx_tests"/*/; do
      cp -u "$dir/model.onnx" "build/fuzz/seeds/onnx/$(basename "$dir").onnx"
    done
    { run_fuzzer fuzz_npy $((seconds / 3)) build/fuzz/corpus/npy tests/data/conv2d
      run_fuzzer fuzz_onnx $((seconds - seconds / 3)) build/fuzz/corpus/onnx build/fuzz/seeds/onnx; } &
  else
    run_fuzzer fuzz_npy "$seconds" build/fuzz/corpus/npy tests/data/conv2d &
  fi
  wait "$first" $!
  local target failed=0
  for target in "${targets[@]}"; do
    tail -n 8 build/fuzz/"$target".log
    if [ "$(cat build/fuzz/"$target".status 2>/dev/null || echo missing)" != 0 ]; then
      echo "$target failed:"
      tail -n 60 build/fuzz/"$target".log
      failed=1
    fi
  done
  return "$failed"
}

configure() {  # configure <build dir> <cmake args...>
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  describe "$dir"
}

cache_value() {  # cache_value <build dir> <variable>
  sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"
}

# The compiler and the flags CMake really passes (the build type's flags, not a guess of them).
describe() {
  local dir=$1 type cxx
  type=$(cache_value "$dir" CMAKE_BUILD_TYPE)
  cxx=$(cache_value "$dir" CMAKE_CXX_COMPILER)
  echo "   $cxx ($("$cxx" --version | head -1)), $type:" \
    "$(cache_value "$dir" CMAKE_CXX_FLAGS) $(cache_value "$dir" "CMAKE_CXX_FLAGS_${type^^}")" \
    "$([ "$(cache_value "$dir" TRACEMOD_NATIVE)" = ON ] && echo "-march=native (tracemod::native)")"
}

last_step=$SECONDS
step() {  # step <title>: prints the title and how long the previous step took
  echo "== $1 (previous step: $((SECONDS - last_step)) s)"
  last_step=$SECONDS
}

case "${1:-}" in
  demo)
    install_missing
    configure build/release -DCMAKE_BUILD_TYPE=Release -DTRACEMOD_QUICK_EXAMPLES=OFF
    cmake --build build/release -j "$jobs" --target quickstart
    ./build/release/examples/quickstart
    ;;
  test)
    packages+=("${fuzz_packages[@]}" "${test_packages[@]}")
    install_missing
    step "release build, every test"
    # The suites of graphs, passes, save/load and bad input are built and run in step 4, under the
    # sanitizers, and not here (docs/build.md)
    # The suites compiled at the same flags as one executable of one unity unit, and one unit for the
    # benchmarks (docs/build.md)
    configure build/release -DCMAKE_BUILD_TYPE=Release -DTRACEMOD_QUICK_EXAMPLES=ON \
      -DTRACEMOD_TESTS_SKIP="test_graph;test_passes;test_serialize;test_robustness" \
      -DTRACEMOD_UNITY_BATCH=64 -DTRACEMOD_BENCH_UNITY_BATCH=64 -DTRACEMOD_TEST_UNITS=1
    cmake --build build/release -j "$jobs"
    # The header check compiles alone only the headers whose content is not in
    # cmake/headers-checked.sums, and those that include them; when it passes, it writes the sums of
    # all headers there (cmake/check-headers.sh), so a passing run's file is the one to commit.
    TRACEMOD_CHECK_HEADERS_RECORD=$PWD/cmake/headers-checked.sums TRACEMOD_CHECK_HEADERS_WRITE=$PWD/cmake/headers-checked.sums \
      ctest --test-dir build/release -j "$jobs" --output-on-failure
    step "the demo and one short benchmark run (so neither can rot)"
    ./build/release/examples/quickstart >/dev/null
    TRACEMOD_BENCH_SMOKE=1 ./build/release/bench/tracemod_bench --benchmark_min_time=0.001 >/dev/null  # bench/smoke.hpp
    if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
      step "clang, AVX2 + FMA only, -ffp-contract=fast: the kernel, fused-evaluation and graph-printing tests"
      # -O1: the kernels are explicit SIMD, so their instructions are the same; a third of -O3's
      # compile time under clang (docs/build.md)
      configure build/clang-avx2 -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
        -DCMAKE_CXX_FLAGS="-mavx2 -mfma -ffp-contract=fast" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
        -DTRACEMOD_UNITY_BATCH=64 -DTRACEMOD_TEST_UNITS=1 -DTRACEMOD_NATIVE=OFF -DTRACEMOD_TESTS_SIMD_ONLY=ON \
        -DTRACEMOD_BUILD_EXAMPLES=OFF -DTRACEMOD_BUILD_BENCH=OFF -DTRACEMOD_INSTALL=OFF
      cmake --build build/clang-avx2 -j "$jobs"
      ctest --test-dir build/clang-avx2 -j "$jobs" --output-on-failure
    else
      step "skipped: this CPU has no AVX2 + FMA for the clang AVX2 pass"
    fi
    step "AddressSanitizer + UndefinedBehaviorSanitizer build (portable SSE2 kernels)"
    # -Og -g1: half the compile time of -O1 -g, reports still name file:line (docs/build.md)
    # One unity unit per test executable: each unit compiles the library once (docs/build.md)
    configure build/sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" \
      -DTRACEMOD_SANITIZE=ON -DTRACEMOD_NATIVE=OFF -DTRACEMOD_UNITY_BATCH=64 \
      -DTRACEMOD_BUILD_EXAMPLES=OFF -DTRACEMOD_BUILD_BENCH=OFF -DTRACEMOD_INSTALL=OFF
    cmake --build build/sanitize -j "$jobs"
    ctest --test-dir build/sanitize -j "$jobs" --output-on-failure
    step "libFuzzer, ASan + UBSan: fuzz_load, fuzz_npy and fuzz_onnx, 30 s on two cores (cmake/tracemod.sh fuzz [seconds] runs longer)"
    run_fuzzers 30 -O0
    step "done"
    ;;
  bench)
    install_missing
    configure build/release -DCMAKE_BUILD_TYPE=Release -DTRACEMOD_QUICK_EXAMPLES=OFF
    cmake --build build/release -j "$jobs" --target tracemod_bench
    shift
    ./build/release/bench/tracemod_bench "$@"
    ;;
  bench-ort)  # bench-ort [options] [model ...]: bench/ort/side_by_side.sh lists them
    command -v npm >/dev/null || packages+=("${ort_packages[@]}")
    install_missing
    configure build/release -DCMAKE_BUILD_TYPE=Release -DTRACEMOD_QUICK_EXAMPLES=OFF
    cmake --build build/release -j "$jobs" --target tracemod_ort
    # onnxruntime-node ships its CPU library in the package; its install script only fetches GPU
    # builds, hence --ignore-scripts. npm runs again only when bench/ort/package.json changes.
    mkdir -p build/ort
    if ! cmp -s bench/ort/package.json build/ort/package.json || [ ! -d build/ort/node_modules/onnxruntime-node ]; then
      cp bench/ort/package.json build/ort/package.json
      (cd build/ort && npm install --ignore-scripts --no-audit --no-fund)
    fi
    shift
    bench/ort/side_by_side.sh build/release/bench/tracemod_ort build/ort "$@"
    ;;
  zoo)  # zoo [model ...]: every model of tests/reference/zoo_export.py, or the named ones
    packages+=("${zoo_packages[@]}")
    install_missing
    configure build/release -DCMAKE_BUILD_TYPE=Release -DTRACEMOD_QUICK_EXAMPLES=OFF
    cmake --build build/release -j "$jobs" --target tracemod_zoo
    shift
    /usr/bin/python3 tests/reference/zoo_export.py build/zoo "$@"
    mapfile -t models < <(/usr/bin/python3 -c 'import sys; sys.path.insert(0, "tests/reference"); import zoo_export; print("\n".join(sys.argv[1:] or zoo_export.MODELS))' "$@")
    echo "| model | imported | rel err | optimize() | save → load | ONNX export → import | ms | ms, optimize() |"
    echo "|---|---|---|---|---|---|---|---|"
    ./build/release/bench/tracemod_zoo "${models[@]/#/build/zoo/}"
    ;;
  fuzz)  # fuzz [seconds, default 60]: the libFuzzer targets of tests/fuzz, ASan + UBSan (see run_fuzzers)
    packages+=("${fuzz_packages[@]}")
    install_missing
    run_fuzzers "${2:-60}"
    ;;
  *)
    echo "usage: cmake/tracemod.sh demo|test|bench [benchmark args]|bench-ort [options] [model ...]|zoo [model ...]|fuzz [seconds]" >&2
    exit 2
    ;;
esac

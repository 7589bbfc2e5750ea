#!/usr/bin/env bash
# The project's two entry points (see README.md), runnable on a fresh Debian 12 machine:
#   cmake/tracemod.sh demo   installs what is missing, builds and runs the main demo
#   cmake/tracemod.sh test   installs what is missing, builds and runs every test, then again
#                            under AddressSanitizer + UndefinedBehaviorSanitizer
#   cmake/tracemod.sh bench  builds and runs the benchmarks (extra arguments go to Google Benchmark)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build libboost-dev xtensor-dev libxsimd-dev doctest-dev libbenchmark-dev nlohmann-json3-dev)

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

configure() {  # configure <build dir> <cmake args...>
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
}

case "${1:-}" in
  demo)
    install_missing
    configure build/release -DCMAKE_BUILD_TYPE=Release
    cmake --build build/release -j "$jobs" --target quickstart
    ./build/release/examples/quickstart
    ;;
  test)
    install_missing
    echo "== release build (-O2, -march=native)"
    configure build/release -DCMAKE_BUILD_TYPE=Release
    cmake --build build/release -j "$jobs"
    ctest --test-dir build/release -j "$jobs" --output-on-failure
    echo "== AddressSanitizer + UndefinedBehaviorSanitizer build (portable SSE2 kernels)"
    configure build/sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
      -DTRACEMOD_SANITIZE=ON -DTRACEMOD_NATIVE=OFF \
      -DTRACEMOD_BUILD_EXAMPLES=OFF -DTRACEMOD_BUILD_BENCH=OFF -DTRACEMOD_INSTALL=OFF
    cmake --build build/sanitize -j "$jobs"
    ctest --test-dir build/sanitize -j "$jobs" --output-on-failure
    ;;
  bench)
    install_missing
    configure build/release -DCMAKE_BUILD_TYPE=Release
    cmake --build build/release -j "$jobs" --target tracemod_bench
    shift
    ./build/release/bench/tracemod_bench "$@"
    ;;
  fuzz)  # fuzz [seconds per target, default 60]: the libFuzzer targets of tests/fuzz, ASan + UBSan
    packages+=(clang-14 libclang-rt-14-dev)
    install_missing
    seconds=${2:-60}
    configure build/fuzz -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
      -DCMAKE_CXX_COMPILER=clang++-14 -DTRACEMOD_FUZZ=ON -DTRACEMOD_NATIVE=OFF \
      -DTRACEMOD_BUILD_EXAMPLES=OFF -DTRACEMOD_BUILD_BENCH=OFF -DTRACEMOD_INSTALL=OFF
    cmake --build build/fuzz -j "$jobs" --target fuzz_load fuzz_npy
    mkdir -p build/fuzz/corpus/load build/fuzz/corpus/npy
    ./build/fuzz/tests/fuzz_load -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
      build/fuzz/corpus/load tests/data/serialize
    ./build/fuzz/tests/fuzz_npy -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
      build/fuzz/corpus/npy tests/data/conv2d
    ;;
  *)
    echo "usage: cmake/tracemod.sh demo|test|bench [benchmark args]|fuzz [seconds]" >&2
    exit 2
    ;;
esac

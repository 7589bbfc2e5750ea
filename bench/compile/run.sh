#!/usr/bin/env bash
# Compile cost of the library (targets in docs/compile-time-tracing.md and docs/build.md):
#  - parsing each layer's header and the umbrella <tracemod/tracemod.hpp> alone (g++ -fsyntax-only),
#    what every translation unit of a user pays before its own code;
#  - generated TUs tracing elementwise chains of 8, 32 and 128 nodes and ResNet-18
#    (examples/models/resnet.hpp), each compiled alone with g++ -O2 -march=native.
# Each under /usr/bin/time -v; prints wall and CPU seconds and peak compiler memory.
#
#   bench/compile/run.sh [work-dir]        (default: a fresh temporary directory)
#   CXX=clang++ bench/compile/run.sh       another compiler
#   EXTRA_FLAGS="-I/some/overlay" ...      prepended to the include path
#   ONLY=headers|graphs bench/compile/run.sh   one group
#
# Targets: the umbrella <= 6 s; 128-node chain <= 8 s and <= 1.5 GiB; ResNet-18 <= 10 s. The verdict
# uses CPU seconds (user + system), which is the wall time of an otherwise idle machine; the wall
# column shows what this run saw.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
cxx=${CXX:-g++}
read -r -a extra <<< "${EXTRA_FLAGS:-}"
flags=("${extra[@]}" -std=c++20 -O2 -march=native -DXTENSOR_USE_XSIMD -I"$root/include" -I"$root/examples")

# measure <name> <target s> <target MiB> <log> <command...>: runs the command under time -v and
# prints one row.
measure() {
  local name=$1 max_s=$2 max_mib=$3 log=$4
  shift 4
  if ! /usr/bin/time -v "$@" 2> "$log"; then
    printf '%-28s FAILED: %s\n' "$name" "$(grep -m1 -E 'error' "$log" | cut -c1-160)"
    return
  fi
  local wall cpu mib verdict="" ok
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$log")
  cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.2f", u + s }' "$log")
  mib=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$log")
  if [[ "$max_s" != 0 ]]; then
    ok=$(awk -v c="$cpu" -v m="$mib" -v ms="$max_s" -v mm="$max_mib" 'BEGIN { print (c <= ms && (mm == 0 || m <= mm)) ? "ok" : "MISSED" }')
    verdict="<= ${max_s} s"
    [[ "$max_mib" == 0 ]] || verdict+=" and <= ${max_mib} MiB"
    verdict+=": $ok"
  fi
  printf '%-28s %8.2f %8.2f %9d  %s\n' "$name" "$wall" "$cpu" "$mib" "$verdict"
}

printf '%-28s %8s %8s %9s  %s\n' "TU" "wall s" "cpu s" "peak MiB" "target"

if [[ -z "${ONLY:-}" || $ONLY == headers ]]; then
  # header, target seconds (0: none)
  headers=("core.hpp|0" "functional.hpp|0" "nn.hpp|0" "trace.hpp|0" "graph.hpp|0" "traced_module.hpp|0"
           "passes.hpp|0" "io/serialize.hpp|0" "tracemod.hpp|6")
  for entry in "${headers[@]}"; do
    IFS='|' read -r header max_s <<< "$entry"
    tu="$work/header_${header//\//_}.cpp"
    printf '#include <tracemod/%s>\n' "$header" > "$tu"
    measure "<tracemod/$header>" "$max_s" 0 "$tu.time" "$cxx" "${flags[@]}" -fsyntax-only "$tu"
  done
fi

if [[ -z "${ONLY:-}" || $ONLY == graphs ]]; then
  # name, generator arguments, target seconds, target MiB (0: none)
  cases=("chain8|chain 8|0|0" "chain32|chain 32|0|0" "chain128|chain 128|8|1536" "resnet18|resnet|10|0")
  for case in "${cases[@]}"; do
    IFS='|' read -r name args max_s max_mib <<< "$case"
    read -r -a gen_args <<< "$args"
    tu="$work/$name.cpp"
    python3 "$here/generate.py" "${gen_args[@]}" "$tu"
    measure "$name" "$max_s" "$max_mib" "$work/$name.time" "$cxx" "${flags[@]}" -c "$tu" -o "$work/$name.o"
  done
fi

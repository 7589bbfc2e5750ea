#!/usr/bin/env bash
# Compile cost of traced graphs (targets in docs/compile-time-tracing.md): generates TUs tracing elementwise chains of 8, 32
# and 128 nodes and ResNet-18 (examples/models/resnet.hpp), compiles each alone with g++ -O2
# -march=native under /usr/bin/time -v, and prints wall and CPU seconds and peak compiler memory.
#
#   bench/compile/run.sh [work-dir]        (default: a fresh temporary directory)
#   CXX=clang++ bench/compile/run.sh       another compiler
#   EXTRA_FLAGS="-I/some/overlay" ...      prepended to the include path
#
# Targets: 128-node chain <= 10 s and <= 1.5 GiB; ResNet-18 <= 45 s. The verdict uses CPU seconds
# (user + system), which is the wall time of an otherwise idle machine; the wall column shows what
# this run saw.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
cxx=${CXX:-g++}
read -r -a extra <<< "${EXTRA_FLAGS:-}"
flags=("${extra[@]}" -std=c++20 -O2 -march=native -DXTENSOR_USE_XSIMD -I"$root/include" -I"$root/examples")

# name, generator arguments, target seconds, target MiB (0: none)
cases=("chain8|chain 8|0|0" "chain32|chain 32|0|0" "chain128|chain 128|10|1536")
if [[ -f "$root/examples/models/resnet.hpp" ]]; then
  cases+=("resnet18|resnet|45|0")
else
  echo "note: examples/models/resnet.hpp does not exist yet; skipping the ResNet-18 TU" >&2
fi

printf '%-10s %8s %8s %9s  %s\n' "TU" "wall s" "cpu s" "peak MiB" "target"
for case in "${cases[@]}"; do
  IFS='|' read -r name args max_s max_mib <<< "$case"
  read -r -a gen_args <<< "$args"
  tu="$work/$name.cpp"
  python3 "$here/generate.py" "${gen_args[@]}" "$tu"
  log="$work/$name.time"
  if ! /usr/bin/time -v "$cxx" "${flags[@]}" -c "$tu" -o "$work/$name.o" 2> "$log"; then
    printf '%-10s FAILED: %s\n' "$name" "$(grep -m1 -E 'error' "$log" | cut -c1-160)"
    continue
  fi
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$log")
  cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.2f", u + s }' "$log")
  mib=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$log")
  verdict=""
  if [[ "$max_s" != 0 ]]; then
    ok=$(awk -v c="$cpu" -v m="$mib" -v ms="$max_s" -v mm="$max_mib" 'BEGIN { print (c <= ms && (mm == 0 || m <= mm)) ? "ok" : "MISSED" }')
    verdict="<= ${max_s} s"
    [[ "$max_mib" == 0 ]] || verdict+=" and <= ${max_mib} MiB"
    verdict+=": $ok"
  fi
  printf '%-10s %8.2f %8.2f %9d  %s\n' "$name" "$wall" "$cpu" "$mib" "$verdict"
done

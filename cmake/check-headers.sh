#!/usr/bin/env bash
# Header self-containment: every public header compiles alone (-fsyntax-only, -Wall -Wextra -Werror)
# with g++ and, when it is installed, clang++. Run by CTest (tests/CMakeLists.txt). The optional
# tracemod/onnx headers need libonnx-dev: they are checked when TRACEMOD_CHECK_ONNX_HEADERS=ON.
# The checks run on every core (it is the longest test of the suite when run one after another).
#   cmake/check-headers.sh <include dir> <extra compiler flags...>
set -euo pipefail
include_dir=$1
shift
compilers=(g++)
command -v clang++ >/dev/null && compilers+=(clang++)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

: > "$work/flags"
[ $# -eq 0 ] || printf '%s\n' "$@" > "$work/flags"

# check <compiler> <header relative to include_dir>: prints the failure, if any.
check() {
  local cxx=$1 rel=$2 tu flags
  mapfile -t flags < "$work/flags"
  tu=$(mktemp -p "$work" --suffix=.cpp)
  printf '#include <%s>\n#include <%s>\n' "$rel" "$rel" > "$tu"  # twice: include guards work
  if ! "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$include_dir" "${flags[@]}" "$tu" 2> "$tu.log"; then
    { echo "FAILED ($cxx): $rel"; head -20 "$tu.log"; } > "$tu.failed"
    cat "$tu.failed"
  fi
}
export -f check
export include_dir work

while IFS= read -r header; do
  rel=${header#"$include_dir"/}
  case $rel in tracemod/onnx/*|tracemod/onnx.hpp) [ "${TRACEMOD_CHECK_ONNX_HEADERS:-OFF}" = ON ] || continue ;; esac
  for cxx in "${compilers[@]}"; do printf '%s\0%s\0' "$cxx" "$rel"; done
done < <(find "$include_dir/tracemod" -name '*.hpp' | sort) |
  xargs -0 -n 2 -P "$(nproc)" bash -c 'check "$0" "$1"'

# A failure is recorded in a .failed file (xargs' own status says nothing about which check failed).
if compgen -G "$work/*.failed" >/dev/null; then exit 1; fi
echo "every header compiles alone with ${compilers[*]}"

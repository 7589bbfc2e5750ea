#!/usr/bin/env bash
# Header self-containment: every public header compiles alone (-fsyntax-only, -Wall -Wextra -Werror;
# umbrella headers, which only include others, are covered by those checks), with clang++ when it is
# installed (it parses the heavy headers, those that include the op registry, in half g++'s time),
# else with g++; and then one translation unit that includes every public header (same flags)
# compiles with g++, so g++ still parses and warns on all of them at the cost of one compilation
# instead of one per header. Run by CTest (tests/CMakeLists.txt). The optional tracemod/onnx headers
# need libonnx-dev: they are checked when TRACEMOD_CHECK_ONNX_HEADERS=ON. The checks run on every
# core (it is the longest test of the suite when run one after another).
#   cmake/check-headers.sh <include dir> <extra compiler flags...>
set -euo pipefail
include_dir=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

: > "$work/flags"
[ $# -eq 0 ] || printf '%s\n' "$@" > "$work/flags"

# An umbrella header (nothing but comments, `#pragma once` and #include lines of other tracemod
# headers, e.g. tracemod/tracemod.hpp) is self-contained when every header it includes is, which
# the g++ checks show; compiling it alone again would only repeat them (it is still part of the
# clang++ all-headers TU).
is_umbrella() {
  ! grep -q -v -E '^[[:space:]]*(//.*)?$|^#pragma once$|^#include <tracemod/[a-z0-9_/]+\.hpp>$' "$1"
}

headers=()
alone=()
while IFS= read -r header; do
  rel=${header#"$include_dir"/}
  case $rel in tracemod/onnx/*|tracemod/onnx.hpp) [ "${TRACEMOD_CHECK_ONNX_HEADERS:-OFF}" = ON ] || continue ;; esac
  headers+=("$rel")
  is_umbrella "$header" || alone+=("$rel")
done < <(find "$include_dir/tracemod" -name '*.hpp' | sort)

# check <compiler> <header relative to include_dir, or "all">: prints the failure, if any. Every
# header is included twice, so include guards are checked too.
check() {
  local cxx=$1 what=$2 tu flags
  mapfile -t flags < "$work/flags"
  tu=$(mktemp -p "$work" --suffix=.cpp)
  if [ "$what" = all ]; then
    sed 's/.*/#include <&>/' "$work/headers" > "$tu"
    sed 's/.*/#include <&>/' "$work/headers" >> "$tu"
  else
    printf '#include <%s>\n#include <%s>\n' "$what" "$what" > "$tu"
  fi
  if ! "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$include_dir" "${flags[@]}" "$tu" 2> "$tu.log"; then
    { echo "FAILED ($cxx): $what"; head -20 "$tu.log"; } > "$tu.failed"
    cat "$tu.failed"
  fi
}
export -f check
export include_dir work
printf '%s\n' "${headers[@]}" > "$work/headers"

alone_cxx=g++
command -v clang++ >/dev/null && alone_cxx=clang++
{
  [ "$alone_cxx" = g++ ] || printf '%s\0%s\0' g++ all  # first: the longest single check
  for rel in "${alone[@]}"; do printf '%s\0%s\0' "$alone_cxx" "$rel"; done
} | xargs -0 -n 2 -P "$(nproc)" bash -c 'check "$0" "$1"'

# A failure is recorded in a .failed file (xargs' own status says nothing about which check failed).
if compgen -G "$work/*.failed" >/dev/null; then exit 1; fi
together=
[ "$alone_cxx" = g++ ] || together="; all ${#headers[@]} compile together with g++"
echo "${#alone[@]} headers compile alone with $alone_cxx ($((${#headers[@]} - ${#alone[@]})) umbrella headers only" \
  "include them)$together"

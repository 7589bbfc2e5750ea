#!/usr/bin/env bash
# Header self-containment: every public header compiles alone (-fsyntax-only, -Wall -Wextra -Werror)
# with g++ and, when it is installed, clang++. Run by CTest (tests/CMakeLists.txt). The optional
# tracemod/onnx headers need libonnx-dev: they are checked when TRACEMOD_CHECK_ONNX_HEADERS=ON.
#   cmake/check-headers.sh <include dir> <extra compiler flags...>
set -euo pipefail
include_dir=$1
shift
compilers=(g++)
command -v clang++ >/dev/null && compilers+=(clang++)
tu=$(mktemp --suffix=.cpp)
trap 'rm -f "$tu"' EXIT
failed=0
while IFS= read -r header; do
  rel=${header#"$include_dir"/}
  case $rel in tracemod/onnx/*|tracemod/onnx.hpp) [ "${TRACEMOD_CHECK_ONNX_HEADERS:-OFF}" = ON ] || continue ;; esac
  printf '#include <%s>\n#include <%s>\n' "$rel" "$rel" > "$tu"  # twice: include guards work
  for cxx in "${compilers[@]}"; do
    if ! "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$include_dir" "$@" "$tu" 2> "$tu.log"; then
      echo "FAILED ($cxx): $rel"
      head -20 "$tu.log"
      failed=1
    fi
  done
done < <(find "$include_dir/tracemod" -name '*.hpp' | sort)
rm -f "$tu.log"
exit $failed

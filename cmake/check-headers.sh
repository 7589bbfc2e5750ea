#!/usr/bin/env bash
# Header self-containment: every public header compiles alone (-fsyntax-only, -Wall -Wextra -Werror;
# umbrella headers, which only include others, are covered by those checks), with clang++ when it is
# installed (it parses the heavy headers, those that include the op registry, in half g++'s time),
# else with g++; and then one translation unit that includes every public header (same flags)
# compiles with g++, so g++ still parses and warns on all of them at the cost of one compilation
# instead of one per header. Run by CTest (tests/CMakeLists.txt). The optional tracemod/onnx headers
# need libonnx-dev: they are checked when TRACEMOD_CHECK_ONNX_HEADERS=ON. The checks run on every
# core (it is the longest test of the suite when run one after another).
#
# Hubs (clang++ only): most headers include a few heavy ones (the op registry, the graph), and
# parsing and instantiating those was most of each check. Each hub is checked alone once, as a
# precompiled header, and a header that reaches a hub through include lines that come before any
# code (in its own file and in every file on the way) is checked with that hub's precompiled header
# in front: the same declarations, in the same order, as compiling the header alone, since the hub
# would have been read in full before any of the header's own code. A header that the hub itself
# includes is checked without it (with it, its check would be empty). docs/build.md measures this.
#   cmake/check-headers.sh <include dir> <extra compiler flags...>
set -euo pipefail
include_dir=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

: > "$work/flags"
[ $# -eq 0 ] || printf '%s\n' "$@" > "$work/flags"

# Hubs: a header is checked after the last one of this list that it reaches.
hubs=(tracemod/kernels/simd.hpp tracemod/core/tensor.hpp tracemod/nn/module.hpp tracemod/functional/registry.hpp
      tracemod/graph/graph.hpp)

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
printf '%s\n' "${headers[@]}" > "$work/headers"

# The include graph: "<header> <included header> head|tail" for every tracemod include line; head
# when no code (a line that is not blank, a comment or a preprocessor line) comes before it.
for rel in "${headers[@]}"; do
  awk -v from="$rel" '
    incomment { if (index($0, "*/")) incomment = 0; next }
    /^[[:space:]]*\/\*/ { if (!index($0, "*/")) incomment = 1; next }
    /^[[:space:]]*(\/\/.*)?$/ { next }
    /^[[:space:]]*#[[:space:]]*include[[:space:]]*<tracemod\// {
      match($0, /<tracemod\/[^>]*>/); print from, substr($0, RSTART + 1, RLENGTH - 2), (code ? "tail" : "head"); next }
    /^[[:space:]]*#/ { next }
    { code = 1 }' "$include_dir/$rel"
done > "$work/edges"

# stem <header>: where its files go in $work (tracemod/graph/graph.hpp: $work/tracemod_graph_graph.hpp).
stem() { echo "$work/$(echo "$1" | tr / _)"; }

reach() {  # reach <header> <head|any>: every header it includes, directly or not
  awk -v start="$1" -v kind="$2" '
    kind == "any" || $3 == "head" { next_of[$1] = next_of[$1] " " $2 }
    END {
      stack[++top] = start
      while (top) {
        h = stack[top--]; n = split(next_of[h], to, " ")
        for (i = 1; i <= n; i++) if (!(to[i] in seen)) { seen[to[i]] = 1; print to[i]; stack[++top] = to[i] }
      }
    }' "$work/edges"
}
for hub in "${hubs[@]}"; do reach "$hub" any > "$(stem "$hub").closure"; done
all_alone=${#alone[@]}

# Only what changed (TRACEMOD_CHECK_HEADERS_RECORD=<file>, set by cmake/tracemod.sh test to
# cmake/headers-checked.sums): the record lists, as sha256sum prints them, the headers that passed
# this check. A header is checked alone when it, or a header it reaches through any include, is not
# in the record with its present content (or is new); the others compile as they did when recorded.
# The all-headers unit is compiled in any case. Unset, or a missing file: every header.
# TRACEMOD_CHECK_HEADERS_WRITE=<file>: when the check passes, every header it covers has now passed
# (alone, or unchanged since it was recorded), so their sums are written there.
header_sums() { (cd "$include_dir" && sha256sum "${headers[@]}"); }
record=${TRACEMOD_CHECK_HEADERS_RECORD:-}
if [ -n "$record" ] && [ -f "$record" ]; then
  header_sums | grep -vxF -f "$record" | sed 's/^[0-9a-f]*  //' > "$work/changed" || true
  changed_alone=()
  for rel in "${alone[@]}"; do
    if grep -qxF "$rel" "$work/changed" || reach "$rel" any | grep -qxF -f "$work/changed"; then
      changed_alone+=("$rel")
    fi
  done
  echo "headers not in ${record##*/} as they are: $(wc -l < "$work/changed"); checking the ${#changed_alone[@]} of ${#alone[@]} that reach them"
  alone=("${changed_alone[@]}")
fi

# hub_of <header>: the last hub of the list that the header reaches through head includes only, that
# is not the header itself and that does not include the header (through any include); none: "".
hub_of() {
  local found= hub reached
  # tracemod/instantiate.hpp must come before every other tracemod header, so no hub goes in front.
  [ "$1" != tracemod/instantiate.hpp ] || return 0
  reached=$(reach "$1" head)
  for hub in "${hubs[@]}"; do
    [ "$hub" != "$1" ] || continue
    grep -qxF "$1" "$(stem "$hub").closure" && continue
    grep -qxF "$hub" <<< "$reached" && found=$hub
  done
  echo "$found"
}

# fail <how> <header> <file>: records and prints a failed check, with the first lines of <file>.log.
fail() {
  { echo "FAILED ($1): $2"; head -20 "$3.log"; } > "$3.failed"
  cat "$3.failed"
}

# check <compiler> <header relative to include_dir, or "all"> [precompiled header]: prints the
# failure, if any. Every header is included twice, so include guards are checked too.
check() {
  local cxx=$1 what=$2 pch=${3:-} tu flags
  mapfile -t flags < "$work/flags"
  tu=$(mktemp -p "$work" --suffix=.cpp)
  if [ "$what" = all ]; then
    # tracemod/instantiate.hpp first: it must precede the other tracemod headers.
    { grep -xF tracemod/instantiate.hpp "$work/headers"; grep -vxF tracemod/instantiate.hpp "$work/headers"; } |
      sed 's/.*/#include <&>/' > "$tu"
    sed 's/.*/#include <&>/' "$work/headers" >> "$tu"
  else
    printf '#include <%s>\n#include <%s>\n' "$what" "$what" > "$tu"
  fi
  [ -z "$pch" ] || flags+=(-include-pch "$pch")
  if ! "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$include_dir" "${flags[@]}" "$tu" 2> "$tu.log"; then
    fail "$cxx${pch:+, after ${pch##*/}}" "$what" "$tu"
  fi
}
export -f check fail
export include_dir work

# hub <header>: the hub checked alone (included twice, same flags) and kept as a precompiled header
# (-fpch-instantiate-templates: its template instantiations are done once, in it). Each hub's is
# built from its source alone, not on another hub's (clang 14's chained precompiled headers lose
# libstdc++'s internal macros).
hub() {
  local flags tu
  tu=$(stem "$1").h
  mapfile -t flags < "$work/flags"
  printf '#include <%s>\n#include <%s>\n' "$1" "$1" > "$tu"
  if ! clang++ -std=c++20 -x c++-header -Wall -Wextra -Werror -fpch-instantiate-templates -I"$include_dir" \
      "${flags[@]}" "$tu" -o "${tu%.h}.pch" 2> "$tu.log"; then
    fail clang++ "$1" "$tu"
  fi
}
export -f hub stem

umbrellas=$((${#headers[@]} - $all_alone))
if command -v clang++ >/dev/null; then
  # Each header to check, with the hub it is checked after; the hubs to build are those checked
  # themselves and those in front of a header.
  : > "$work/plan"
  needed_hubs=()
  for rel in "${alone[@]}"; do
    if printf '%s\n' "${hubs[@]}" | grep -qxF "$rel"; then needed_hubs+=("$rel"); continue; fi
    pch=$(hub_of "$rel")
    [ -z "$pch" ] || needed_hubs+=("$pch")
    printf '%s %s\n' "$rel" "$pch" >> "$work/plan"
  done
  mapfile -t needed_hubs < <(printf '%s\n' "${needed_hubs[@]}" | sed '/^$/d' | sort -u)
  # First the hubs, beside the longest single check (g++, all headers); then the other headers.
  {
    printf '%s\0%s\0' check all
    for h in "${needed_hubs[@]}"; do printf '%s\0%s\0' hub "$h"; done
  } | xargs -0 -n 2 -P "$(nproc)" bash -c 'if [ "$0" = check ]; then check g++ all; else hub "$1"; fi'
  while read -r rel pch; do
    [ -n "$pch" ] && pch=$(stem "$pch").pch
    [ -f "$pch" ] || pch=  # the hub failed (and says so): this header is checked without it
    printf '%s\0%s\0%s\0' clang++ "$rel" "$pch"
  done < "$work/plan" | xargs -0 -r -n 3 -P "$(nproc)" bash -c 'check "$0" "$1" "$2"'
  summary="${#alone[@]} of $all_alone headers compile alone with clang++ (${#needed_hubs[@]} hubs built, $umbrellas umbrella headers only include others); all ${#headers[@]} compile together with g++"
else
  for rel in "${alone[@]}"; do printf '%s\0%s\0' g++ "$rel"; done | xargs -0 -r -n 2 -P "$(nproc)" bash -c 'check "$0" "$1"'
  summary="${#alone[@]} of $all_alone headers compile alone with g++ ($umbrellas umbrella headers only include others)"
fi

# A failure is recorded in a .failed file (xargs' own status says nothing about which check failed).
if compgen -G "$work/*.failed" >/dev/null; then exit 1; fi
echo "$summary"
[ -z "${TRACEMOD_CHECK_HEADERS_WRITE:-}" ] || header_sums > "$TRACEMOD_CHECK_HEADERS_WRITE"

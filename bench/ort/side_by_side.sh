#!/usr/bin/env bash
# tracemod next to ONNX Runtime on the same ONNX files (cmake/tracemod.sh bench-ort, docs/build.md):
#   side_by_side.sh <tracemod_ort> <npm dir> [--batch B] [--rounds R] [--runs N] [model ...]
# A model is resnet18 or mobilenet_v2 (default: both), exported by tracemod_ort at batch B into
# <npm dir>/models/<model>_b<B>, or a directory holding model.onnx and input_<i>.npy (a zoo export
# of cmake/tracemod.sh zoo; its inputs fix the batch). For each model, R rounds (default 3) each run
# at 1 and 2 threads a tracemod process, then an ONNX Runtime process, each timing N runs (default
# 10) after two untimed ones and printing its median; processes alternate so that the drift of a
# shared machine reaches both engines alike. Prints a Markdown table: the median over the rounds of
# each engine's medians, their ratio, and each engine's output against output.npy.
set -euo pipefail

usage() {
  echo "usage: $0 <tracemod_ort> <npm dir> [--batch B] [--rounds R] [--runs N] [resnet18|mobilenet_v2|<dir> ...]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
tracemod_ort=$1 npm_dir=$2
shift 2
batch=1 rounds=3 runs=10
while [ $# -gt 0 ] && [[ $1 == --* ]]; do
  [ $# -ge 2 ] || usage
  case $1 in
    --batch) batch=$2 ;;
    --rounds) rounds=$2 ;;
    --runs) runs=$2 ;;
    *) usage ;;
  esac
  shift 2
done
[ $# -gt 0 ] || set -- resnet18 mobilenet_v2
time_ort=$(cd "$(dirname "$0")" && pwd)/time_ort.js
threads=(1 2)

median() {  # median of the numbers in $1, one per word (the lower middle of an even count)
  tr ' ' '\n' <<< "$1" | sort -g | awk 'NF { v[++n] = $1 } END { print v[int((n + 1) / 2)] }'
}

echo "| model | batch | threads | tracemod ms | ONNX Runtime ms | tracemod / ORT | rel err tracemod, ORT |"
echo "|---|---|---|---|---|---|---|"
for model in "$@"; do
  if [ -f "$model/model.onnx" ]; then
    dir=$model
    # the batch is the first extent of the first input, read from its .npy header
    model_batch=$(head -c 256 "$dir/input_0.npy" | tr -d '\0' | grep -ao "'shape': ([0-9]*" | grep -o '[0-9]*$' || echo "?")
  else
    dir=$npm_dir/models/${model}_b$batch model_batch=$batch
    "$tracemod_ort" export "$dir" "$model" "$batch"
  fi
  declare -A tm=() rt=() tm_err=() rt_err=()
  for ((round = 0; round < rounds; ++round)); do
    for t in "${threads[@]}"; do
      out=$("$tracemod_ort" time "$dir" "$t" "$runs")
      read -r ms err <<< "$out"
      tm[$t]+="$ms " tm_err[$t]=$err
      out=$(NODE_PATH=$npm_dir/node_modules node "$time_ort" "$dir" "$t" "$runs")
      read -r ms err <<< "$out"
      rt[$t]+="$ms " rt_err[$t]=$err
    done
  done
  for t in "${threads[@]}"; do
    a=$(median "${tm[$t]}") b=$(median "${rt[$t]}")
    printf "| %s | %s | %s | %.2f | %.2f | %.2f | %s, %s |\n" "$(basename "$model")" "$model_batch" "$t" "$a" "$b" \
      "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')" "${tm_err[$t]}" "${rt_err[$t]}"
  done
  unset tm rt tm_err rt_err
done

#!/usr/bin/env bash
# gpt2_decode against Hugging Face transformers' GPT2Model on the same weights and cache
# (docs/PERFORMANCE.md, lesson 11): the GPU test writes a step, the Python check redoes it.
#   gpt2_transformers.sh GPU_TESTS OUTDIR
set -euo pipefail
tests="$1"
out="$2"
rm -rf "$out"
mkdir -p "$out"
FL_GPT2_STEP_DIR="$out" "$tests" --gtest_filter=Gpt2DecodeGpu.WritesAStepForTransformers
python3 "$(dirname "$0")/gpt2_transformers_check.py" "$out"

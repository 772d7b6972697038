#!/usr/bin/env bash
# gpt2_decode against Hugging Face transformers' GPT2Model on the same weights and cache
# (docs/PERFORMANCE.md, lesson 11): the GPU test writes a step, the Python check redoes it.
# Twice: 1 new token (level 4 is the cluster step on an sm_90 build) and 3 (the task list). The
# last line, "gpt2_transformers: passed at 1 and 3 tokens", comes only when both passed.
#   gpt2_transformers.sh GPU_TESTS OUTDIR
set -euo pipefail
tests="$1"
out="$2"
rm -rf "$out"
for tokens in 1 3; do
  mkdir -p "$out/$tokens"
  FL_GPT2_STEP_TOKENS=$tokens FL_GPT2_STEP_DIR="$out/$tokens" "$tests" \
    --gtest_filter=Gpt2DecodeGpu.WritesAStepForTransformers
  python3 "$(dirname "$0")/gpt2_transformers_check.py" "$out/$tokens"
done
echo "gpt2_transformers: passed at 1 and 3 tokens"

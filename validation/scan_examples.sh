#!/usr/bin/env bash
# The example scan, matrix and SARIF reports in reports/, from real engine releases fetched from PyPI:
#   bash validation/scan_examples.sh
# (The smoke examples come from validation/smoke_examples.py, which launches a real engine.)
# Kimi-K2.5 on vLLM 0.17.0 before and after the kimi_k2 bundle: the bundle is applied to a copy of the release
# in the user cache, so that the reports name it as a user would (~/.cache/...).
set -euo pipefail
cd "$(dirname "$0")/.."
out=reports
copy="$HOME/.cache/specaudit/examples/vllm-0.17.0-patched"

specaudit scan vllm==0.17.0 --target kimi-k2.5 --format md --format html --format json --format sarif --out "$out" || test $? -eq 1
specaudit matrix --target kimi-k2.5 --target deepseek-v3 --target llama3 vllm==0.14.0 vllm==0.17.0 vllm==0.20.0 \
  vllm==0.33.0 sglang==0.5.8 sglang==0.5.23 --format md --format html --format sarif --format json --out "$out" \
  || test $? -eq 1

# After: the bundle applied to a copy of 0.17.0, scanned; the report goes beside the one before.
tree=$(python -c 'from specaudit.locate import locate; print(locate("vllm==0.17.0").root)')
rm -rf "$copy" && mkdir -p "$(dirname "$copy")" && cp -r "$tree" "$copy"
specaudit patch --target kimi_k2 --path "$copy"
specaudit scan --path "$copy" --target kimi-k2.5 --format md --format html --out "$out/patched"
specaudit patch --revert --path "$copy"

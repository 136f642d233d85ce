#!/bin/bash
# Device call 2 (carry .gpu/partM), within 30 s of call 1: vLLM's MoE kernels (_moe_C_stable_libtorch, 40 MB of
# xz), which the Qwen3-MoE target's fused MoE calls (moe_align_block_size) and which do not fit in call 1's carry.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
test -d /root/site/vllm || { echo "NO_STAGE: the machine of call 1 was not kept"; exit 3; }
xz -dc .gpu/partM/moe.xz > /root/site/vllm/_moe_C_stable_libtorch.abi3.so && ls -l /root/site/vllm/*.so | tee "$O/so.txt"

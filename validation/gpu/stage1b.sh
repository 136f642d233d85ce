#!/bin/bash
# Device call 2 (carry .gpu/partM), within 30 s of call 1: vLLM's MoE kernels (_moe_C_stable_libtorch, 40 MB of
# xz), which the Qwen3-MoE target's fused MoE calls (moe_align_block_size) and which do not fit in call 1's carry.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
test -d /root/site/vllm || { echo "NO_STAGE: the machine of call 1 was not kept"; exit 3; }
xz -dc .gpu/partM/moe.xz > /root/site/vllm/_moe_C_stable_libtorch.abi3.so && ls -l /root/site/vllm/*.so | tee "$O/so.txt"
# transformers 5.12.1 + tokenizers 0.22.2 for the LLaVA cells only (grid.py puts /root/tf first on their PYTHONPATH):
# vLLM 0.26.0 requires transformers>=5.5.3, and the image's 5.17.0 dropped PixtralRotaryEmbedding, which
# vllm/model_executor/models/pixtral.py imports (the first round's llava--*.log: the registry's inspection failed).
if [ -f .gpu/partM/tf.tar.xz ]; then mkdir -p /root/tf && xz -dc .gpu/partM/tf.tar.xz | tar -C /root/tf -xf - && ls /root/tf | tee -a "$O/so.txt"; fi

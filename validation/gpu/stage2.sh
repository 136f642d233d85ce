#!/bin/bash
# Device call 3 (carry .gpu/partA), within 30 s of call 2 on the same warm machine: add _C_stable_libtorch, then
# run the vLLM cells of the grid (grid.py, cells.py) and pack their logs into $OUT/vllm-logs.tar.gz.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O" /root/logs/vllm
test -f /root/site/vllm/_moe_C_stable_libtorch.abi3.so || { echo "NO_STAGE: the machine of calls 1-2 was not kept"; exit 3; }
T0=$(date +%s)
xz -dc .gpu/partA/c.xz > /root/site/vllm/_C_stable_libtorch.abi3.so
echo "unpack_C $(( $(date +%s) - T0 ))s" > "$O/times2.txt"
export PYTHONPATH=/root/site PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi > /root/logs/vllm/nvidia-smi-before.txt 2>&1
python3 "$(dirname "$0")/grid.py" vllm /root/m /root/logs/vllm ${BUDGET:-540} ${CELLS:-} 2>&1 | tee "$O/drive.txt"
echo "drive $(( $(date +%s) - T0 ))s" >> "$O/times2.txt"
nvidia-smi > /root/logs/vllm/nvidia-smi-after.txt 2>&1
tar -C /root/logs -czf "$O/vllm-logs.tar.gz" vllm
cat "$O/times2.txt"

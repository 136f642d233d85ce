#!/bin/bash
# SGLang 0.5.17 cells of the grid, one device call (carry .gpu/sglang: site.tar.xz of prepare_sglang.sh):
#   run(command="bash validation/gpu/sglang_grid.sh", carry=[".gpu/sglang"], timeout_s=600)
# Unpacks SGLang into $HOME/sgl, builds the grid's checkpoints into /root/m unless a previous call of this machine
# did, launches the SGLang cells (grid.py sglang: the first alone, the rest together) and packs the logs into
# $OUT/sglang-logs.tar.gz. Environment as in sglang_run.sh (SGLANG.md): Triton attention, no flashinfer attention,
# flashinfer's JIT norm kernels built on first use with the image's nvcc.
set -u
T0=$(date +%s)
O=${OUT:-/tmp/out}; mkdir -p "$O"
HERE=$(cd "$(dirname "$0")" && pwd)
H=${HOME:-/root}; [ -w "$H" ] || H=/root
S=$H/sgl; M=/root/m; mkdir -p "$S" "$M" /root/logs/sglang
xz -dc .gpu/sglang/site.tar.xz | tar -C "$S" -xf -
echo "unpacked $(( $(date +%s) - T0 ))s" | tee "$O/sglang-times.txt"
[ -d "$M/target-llama" ] || python3 "$HERE/grid_models.py" "$M" > "$O/sglang-models.json" 2>&1
echo "models $(( $(date +%s) - T0 ))s" >> "$O/sglang-times.txt"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 SGLANG_IS_FLASHINFER_AVAILABLE=false \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 DO_NOT_TRACK=1 FLASHINFER_CUDA_ARCH_LIST=9.0a
command -v nvcc >/dev/null && export CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
export PYTHONPATH=$S
python3 "$HERE/grid.py" sglang "$M" /root/logs/sglang $(( ${BUDGET:-560} - $(date +%s) + T0 )) ${CELLS:-} 2>&1 | tee "$O/sglang-drive.txt"
nvidia-smi > /root/logs/sglang/nvidia-smi-after.txt 2>&1
tar -C /root/logs -czf "$O/sglang-logs.tar.gz" sglang
echo "done $(( $(date +%s) - T0 ))s" >> "$O/sglang-times.txt"; cat "$O/sglang-times.txt"

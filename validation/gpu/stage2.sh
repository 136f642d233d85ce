#!/bin/bash
# Device call 3 (carry .gpu/partA), within 30 s of call 2 on the same warm machine: add _C_stable_libtorch, then
# run the vLLM cells of the grid (grid.py, cells.py) and pack their logs into $OUT/vllm-logs.tar.gz.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O" /root/logs/vllm
# the stage of call 1 (call 2's MoE kernels only where a Qwen3-MoE cell runs: NEED_MOE=0 for a round without one)
test -d /root/site/vllm || { echo "NO_STAGE: the machine of call 1 was not kept"; exit 3; }
[ "${NEED_MOE:-1}" = 0 ] || test -f /root/site/vllm/_moe_C_stable_libtorch.abi3.so || { echo "NO_STAGE: the machine of calls 1-2 was not kept"; exit 3; }
T0=$(date +%s)
xz -dc .gpu/partA/c.xz > /root/site/vllm/_C_stable_libtorch.abi3.so
echo "unpack_C $(( $(date +%s) - T0 ))s" > "$O/times2.txt"
export PYTHONPATH=/root/site PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi > /root/logs/vllm/nvidia-smi-before.txt 2>&1
# What the launches can import beside vLLM, folder by folder of sys.path (report.py's device layout: a gate that reads
# what is installed, as suffix decoding's arctic-inference, is judged against it): `pkg|dir|file NAME` a line.
python3 - > "$O/device-site.txt" 2>&1 <<'PY'
import importlib.util, os, sys
print("# python", sys.version.split()[0], "arctic_inference:", importlib.util.find_spec("arctic_inference"))
for folder in sys.path:
    if not os.path.isdir(folder) or not (folder.rstrip("/").endswith(("site-packages", "dist-packages")) or folder.startswith("/root/site")):
        continue
    print("# " + folder)
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        kind = ("pkg" if os.path.isfile(os.path.join(path, "__init__.py")) else "dir") if os.path.isdir(path) else "file"
        print(kind, name)
PY
python3 "$(dirname "$0")/grid.py" vllm /root/m /root/logs/vllm ${BUDGET:-540} ${CELLS:-} 2>&1 | tee "$O/drive.txt"
echo "drive $(( $(date +%s) - T0 ))s" >> "$O/times2.txt"
nvidia-smi > /root/logs/vllm/nvidia-smi-after.txt 2>&1
tar -C /root/logs -czf "$O/vllm-logs.tar.gz" vllm
cat "$O/times2.txt"

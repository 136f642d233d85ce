#!/bin/bash
# Device call 1 (carry .gpu/partB): environment check, unpack vLLM 0.26.0 (slimmed, without its two big
# extensions) + its missing pure-Python deps into /root/site, build the grid's tiny checkpoints into /root/m
# (grid_models.py, with the image's torch and transformers), and byte-compile /root/site (each vLLM process
# imports it; cold imports cost ~20 s each). Files outside $OUT survive only while the machine stays warm (30 s).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O" /root/site /root/m
T0=$(date +%s.%N)
t() { echo "$1 $(python3 -c "import time;print(round(time.time()-$T0,1))")" >> "$O/times.txt"; }
{
  python3 -c 'import torch,sys;print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0))'
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  for b in xz nvcc ninja c++; do echo "$b: $(command -v $b)"; done
  df -h /root /tmp | tail -2; nproc; free -g | head -2
} > "$O/env.txt" 2>&1
t env
python3 -m pip list --format=freeze > "$O/pip_freeze.txt" 2>/dev/null
t freeze
xz -dc .gpu/partB/rest.tar.xz | tar -C /root/site -xf -
du -sh /root/site >> "$O/env.txt"
t unpack
python3 "$(dirname "$0")/grid_models.py" /root/m > "$O/models.json" 2> "$O/models.err"
t models
python3 -m compileall -q -j 16 /root/site > "$O/compileall.txt" 2>&1; echo "compileall rc $?" >> "$O/env.txt"
t compileall
tail -3 "$O/models.err"; cat "$O/models.json"; cat "$O/times.txt"

#!/bin/bash
# The GPU smoke rounds on the lent H200, one device call per invocation (README.md beside this file has the calls and
# their carries). Every call first keeps the pieces it carried (.gpu/smoke, .gpu/pieces/*, .gpu/sglang) in /root/parts,
# where they wait for the next call (the machine keeps its disk 30 s after a call), then runs its steps in order:
#
#   base        OpenSSH up on 127.0.0.1 (ssh_up.sh), specaudit and its missing deps installed into the image's Python,
#               the checkpoints built (models.py) into /root/m
#   vllm        the pieces put back together (sha256 checked), vLLM 0.26.0 unpacked into /root/site with its _C and
#               MoE kernels, a `vllm` console script in /root/bin (shebang: the image's python3)
#   run-vllm    drive.py vllm (BUDGET seconds, CELLS to pick) -> $OUT/vllm/
#   sglang      SGLang 0.5.17 unpacked into /root/sgl
#   run-sglang  drive.py sglang -> $OUT/sglang/
#   scan-sglang `specaudit scan /root/sgl -- <launch>` of each cell in CELLS (the installed wheel, the real checkpoints
#               in /root/m), before its smoke -> $OUT/scan-sglang.tgz (scan-vllm: /root/site)
#
# A step whose inputs are missing (a lost machine: NO_STAGE) exits 3 at once. $OUT/stage/: what each step saw and took.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/out}; S=$O/stage; mkdir -p "$S" /root/parts
T0=$(date +%s)
t() { echo "$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s $*" | tee -a "$S/times.txt"; }
for d in .gpu/smoke .gpu/pieces .gpu/sglang .gpu/sglang-a; do [ -d "$d" ] && cp -r "$d" /root/parts/; done
t "kept: $(ls /root/parts/* 2>/dev/null | tr '\n' ' ')"
# the environment of every ssh session (sshd SetEnv): the engine's site, its console scripts, no network
SESSION_ENV="PATH=/root/bin:$(dirname "$(command -v python3)"):/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
PYTHONPATH=/root/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 \
NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 CUDA_HOME=/usr/local/cuda"
export PATH=/root/ssh/wrap:$PATH

base() {
  test -f /root/parts/smoke/ssh.tar.xz || { echo "NO_STAGE: .gpu/smoke was not carried"; exit 3; }
  {
    python3 -c 'import torch,sys;print(sys.executable, sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(0))'
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    cat /etc/os-release | head -2; id; for b in ssh sshd ps setsid; do echo "$b: $(command -v $b)"; done
  } > "$S/env.txt" 2>&1
  SSH_TAR=/root/parts/smoke/ssh.tar.xz SESSION_ENV=$SESSION_ENV bash "$HERE/ssh_up.sh" "$S"
  t "ssh up"
  python3 -m pip install -q --no-deps --no-index /root/parts/smoke/*.whl > "$S/pip.txt" 2>&1
  echo "pip rc $?; specaudit at $(cat /root/parts/smoke/COMMIT)" >> "$S/pip.txt"
  specaudit --version >> "$S/pip.txt" 2>&1
  t "specaudit installed: $(tail -1 "$S/pip.txt")"
  python3 "$HERE/models.py" /root/m > "$S/models.json" 2> "$S/models.err"
  t "models: $(tail -c 300 "$S/models.json")"
}

vllm() {
  test -d /root/ssh || { echo "NO_STAGE: base did not run on this machine"; exit 3; }
  cat /root/parts/pieces/vllm.* > /root/vllm.tar || { echo "NO_STAGE: pieces missing"; exit 3; }
  [ "$(sha256sum /root/vllm.tar | cut -d' ' -f1)" = "$(cat /root/parts/smoke/vllm.sha256)" ] \
    || { echo "NO_STAGE: the pieces do not make the bundle ($(ls -l /root/parts/pieces | tr '\n' ' '))"; exit 3; }
  mkdir -p /root/site /root/bin /root/vb && tar -C /root/vb -xf /root/vllm.tar && rm -f /root/vllm.tar
  xz -dc /root/vb/partB/rest.tar.xz | tar -C /root/site -xf -
  xz -dc /root/vb/partA/c.xz > /root/site/vllm/_C_stable_libtorch.abi3.so
  xz -dc /root/vb/partM/moe.xz > /root/site/vllm/_moe_C_stable_libtorch.abi3.so
  rm -rf /root/vb
  # as pip writes a console script: the guard matters, vLLM's engine core is a spawned process that imports __main__
  printf '#!%s\nimport sys\nfrom vllm.entrypoints.cli.main import main\nif __name__ == "__main__":\n    sys.exit(main())\n' \
    "$(command -v python3)" > /root/bin/vllm
  chmod +x /root/bin/vllm
  python3 -m compileall -q -j 16 /root/site > /dev/null 2>&1
  t "vllm staged: $(du -sh /root/site | cut -f1)"
}

sglang() {
  test -d /root/ssh || { echo "NO_STAGE: base did not run on this machine"; exit 3; }
  # site.tar.xz whole, or cut where the tree leaves a call too little room (round 5): its pieces site.tar.xz.NN in
  # .gpu/sglang-a (carried with base) and .gpu/sglang, put back together in the order of their numbers
  local site=/root/parts/sglang/site.tar.xz
  if [ ! -f $site ] && ls /root/parts/sglang*/site.tar.xz.?? > /dev/null 2>&1; then
    find /root/parts -path '/root/parts/sglang*/site.tar.xz.??' -printf '%f %p\n' | sort | cut -d" " -f2 \
      | xargs cat > /root/site.tar.xz
    site=/root/site.tar.xz
    [ "$(sha256sum $site | cut -d' ' -f1)" = "$(cat /root/parts/sglang*/site.sha256 | head -1)" ] \
      || { echo "NO_STAGE: the pieces do not make site.tar.xz ($(ls -l /root/parts/sglang* | tr '\n' ' '))"; exit 3; }
  fi
  test -f $site || { echo "NO_STAGE: .gpu/sglang was not carried"; exit 3; }
  mkdir -p /root/sgl && xz -dc $site | tar -C /root/sgl -xf -
  t "sglang staged: $(du -sh /root/sgl | cut -f1)"
}

run() {  # run ENGINE: the cells, then the reports and logs packed in one file (a call brings back a few files only)
  local engine=$1
  rm -rf "/root/o/$engine" /root/runs
  nvidia-smi > "$S/nvidia-smi-before-$engine.txt" 2>&1
  python3 "$HERE/drive.py" "$engine" /root/m "/root/o/$engine" "${BUDGET:-480}" ${CELLS:-} 2>&1 | tee "$S/drive-$engine.txt"
  cp /root/ssh/keys/sshd.log "$S/sshd-$engine.log" 2>/dev/null
  tar -C /root/o -czf "$O/$engine.tgz" "$engine"
  t "ran $engine"
}

scan() {  # scan ENGINE: the scan of each cell's launch command, as a user runs it before launching (round 4)
  local engine=$1 tree=/root/site cell d cmd
  [ "$engine" = sglang ] && tree=/root/sgl
  rm -rf "/root/o/scan-$engine" && mkdir -p "/root/o/scan-$engine"
  for cell in ${CELLS:-}; do
    d=/root/o/scan-$engine/$cell && mkdir -p "$d"
    cmd=$(python3 -c "import shlex, sys; sys.path.insert(0, '$HERE'); import cells
print(shlex.join(cells.command(cells.CELLS['$cell'], '/root/m', 30199)))")
    echo "specaudit scan $tree --format json --out $d -- $cmd" > "$d/argv.txt"
    (cd "$d" && eval "COLUMNS=150 timeout 240 specaudit scan $tree --format json --out $d -- $cmd" > "$d/terminal.txt" 2>&1
     echo $? > "$d/rc")
    t "scan $cell: exit $(cat "$d/rc")"
  done
  tar -C /root/o -czf "$O/scan-$engine.tgz" "scan-$engine"
}

for step in "$@"; do
  case $step in
    base) base ;;
    vllm) vllm ;;
    sglang) sglang ;;
    run-vllm) run vllm ;;
    run-sglang) run sglang ;;
    scan-vllm) scan vllm ;;
    scan-sglang) scan sglang ;;
    keep) ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
t "done: $*"

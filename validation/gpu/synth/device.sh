#!/bin/bash
# The synthesized-bundle round on the lent H200 (issue 42), one device call per invocation; README.md beside this file
# has the calls and their carries. Every call first keeps what it carried (.gpu/partB, .gpu/synth/*, .gpu/sglang) in
# /root/parts, where it waits for the next call (the machine keeps its disk 30 s after a call), then runs its steps:
#
#   models      the checkpoints (validation/patch_synth_gpu_models.py, the image's torch and transformers) in /root/m
#   vllm        vLLM 0.26.0 into /root/site (partB, and partA's two halves .gpu/synth/a0 + a1), byte-compiled; then one
#               copy of the site per synthesized bundle, /root/vp-<name>: symlinks to the pristine files but the
#               bundle's, whose pristine sha256 must be the fetched wheel's (files/<engine>-<name>/SHA256)
#   sglang      SGLang 0.5.17 into /root/sgl, and /root/sp-<name> the same way
#   run-vllm    drive.py vllm -> $OUT/vllm.tgz;  run-sglang: drive.py sglang -> $OUT/sglang.tgz
#
# A step whose inputs are missing (a lost machine) exits 3 at once (NO_STAGE).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
O=${OUT:-/tmp/out}; S=$O/stage; mkdir -p "$S" /root/parts
T0=$(date +%s)
t() { echo "$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s $*" | tee -a "$S/times.txt"; }
for d in .gpu/partB .gpu/sglang .gpu/synth/a0 .gpu/synth/a1 .gpu/synth/files; do [ -d "$d" ] && cp -r "$d" /root/parts/; done
t "kept: $(ls /root/parts | tr '\n' ' ')"

farm() {  # farm SITE PKG DEST FILES_DIR: DEST mirrors SITE by symlinks, the bundle's files in place of PKG's own
  local site=$1 pkg=$2 dest=$3 files=$4 rel
  rm -rf "$dest"; mkdir -p "$dest"
  for e in "$site"/*; do [ "$(basename "$e")" = "$pkg" ] || ln -s "$e" "$dest/$(basename "$e")"; done
  cp -as "$site/$pkg" "$dest/$pkg"
  while read -r sum rel; do
    [ "$(sha256sum "$site/$rel" | cut -d' ' -f1)" = "$sum" ] || { echo "PRISTINE MISMATCH $site/$rel"; return 1; }
    rm -f "$dest/$rel" "$(dirname "$dest/$rel")/__pycache__/$(basename "$rel" .py)".*.pyc
    cp "$files/$rel" "$dest/$rel"
    echo "farm $dest: $rel patched ($(sha256sum "$dest/$rel" | cut -c1-12))"
  done < "$files/SHA256.pristine"
}

models() {
  python3 "$ROOT/validation/patch_synth_gpu_models.py" /root/m > "$S/models.json" 2> "$S/models.err"
  t "models: $(tail -c 300 "$S/models.json")"
}

vllm() {
  test -f /root/parts/partB/rest.tar.xz -a -f /root/parts/a0/c.xz.0 -a -f /root/parts/a1/c.xz.1 \
    || { echo "NO_STAGE: $(ls -R /root/parts | tr '\n' ' ')"; exit 3; }
  mkdir -p /root/site && xz -dc /root/parts/partB/rest.tar.xz | tar -C /root/site -xf -
  cat /root/parts/a0/c.xz.0 /root/parts/a1/c.xz.1 | xz -dc > /root/site/vllm/_C_stable_libtorch.abi3.so
  python3 -m compileall -q -j 16 /root/site > /dev/null 2>&1
  t "vllm staged: $(du -sh /root/site | cut -f1)"
  for f in /root/parts/files/vllm-*; do farm /root/site vllm "/root/vp-${f##*/vllm-}" "$f" | tee -a "$S/farm.txt"; done
  t "vllm farms: $(ls -d /root/vp-* | tr '\n' ' ')"
}

sglang() {
  test -f /root/parts/sglang/site.tar.xz || { echo "NO_STAGE: .gpu/sglang was not carried"; exit 3; }
  mkdir -p /root/sgl && xz -dc /root/parts/sglang/site.tar.xz | tar -C /root/sgl -xf -
  for f in /root/parts/files/sglang-*; do farm /root/sgl sglang "/root/sp-${f##*/sglang-}" "$f" | tee -a "$S/farm.txt"; done
  t "sglang staged: $(du -sh /root/sgl | cut -f1); farms: $(ls -d /root/sp-* | tr '\n' ' ')"
}

run() {
  local engine=$1
  test -d /root/m || models
  if command -v nvcc >/dev/null; then export CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")"); fi
  nvidia-smi > "$S/nvidia-smi-before-$engine.txt" 2>&1
  python3 "$HERE/drive.py" "$engine" /root/m "/root/o/$engine" "${BUDGET:-400}" 2>&1 | tee "$S/drive-$engine.txt"
  nvidia-smi > "$S/nvidia-smi-after-$engine.txt" 2>&1
  tar -C /root/o -czf "$O/$engine.tgz" "$engine"
  t "ran $engine"
}

for step in "$@"; do
  case $step in
    models) models ;;
    vllm) vllm ;;
    sglang) sglang ;;
    run-vllm) run vllm ;;
    run-sglang) run sglang ;;
    keep) ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
t "done: $*"

#!/bin/bash
# The carried parts of the GPU smoke rounds, built on the CPU machine (it reaches PyPI and Debian), into .gpu/ (which
# must be in .git/info/exclude). Run from the repository root, after validation/gpu/prepare_parts.sh (.gpu/partA,
# .gpu/partB) and validation/gpu/prepare_sglang.sh (.gpu/sglang):
#
#   PY312=$(pyenv root)/versions/3.12.1/bin/python3.12 [REV=commit] bash validation/gpu/smoke/prepare.sh
#
# Writes
#   .gpu/smoke/: ssh.tar.xz (Debian 12's ssh, sshd, ssh-keygen and every library they link but glibc's own, from
#     `apt-get download openssh-client openssh-server`), the cp312 wheels specaudit needs beside what the image has
#     (libcst, GitPython, gitdb, smmap), and specaudit's own wheel, built from `git archive HEAD` (COMMIT says which)
#   .gpu/partM/moe.xz: vLLM 0.26.0's MoE kernels (_moe_C_stable_libtorch.abi3.so; prepare_parts.sh drops them, the
#     MoE MTP targets need them)
#   .gpu/pieces/vllm.NN: partB + partA + partM as one tar, cut so that each device call stays under the 64 MiB it
#     carries beside the working tree: vllm.00 rides with .gpu/smoke (call 1), the others one a call; sizes in
#     .gpu/pieces/PLAN
set -euo pipefail
ROOT=$(pwd); W=${W:-/tmp/gpu-smoke-prep}; PY312=${PY312:-python3.12}
VLLM_DL=${VLLM_DL:-/tmp/vllm-gpu-parts/dl}
git check-ignore -q .gpu/x || { echo ".gpu/ is not ignored: add /.gpu/ to .git/info/exclude" >&2; exit 2; }
mkdir -p "$W/debs" "$W/root" "$W/pack/bin" "$W/pack/lib" .gpu/smoke .gpu/partM .gpu/pieces
# 1. OpenSSH from Debian's packages, and the libraries its binaries link (the device keeps the ones it lacks)
(cd "$W/debs" && apt-get download openssh-client openssh-server)
for deb in "$W"/debs/*.deb; do dpkg -x "$deb" "$W/root"; done
cp "$W/root/usr/bin/ssh" "$W/root/usr/bin/ssh-keygen" "$W/root/usr/sbin/sshd" "$W/pack/bin/"
for b in "$W"/pack/bin/*; do ldd "$b" | awk '/=> \//{print $3}'; done | sort -u \
  | grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv)\.so' | xargs -I{} cp -L {} "$W/pack/lib/"
tar -C "$W/pack" -cJf .gpu/smoke/ssh.tar.xz .
# 2. specaudit's dependencies the image lacks (its pip freeze: validation/gpu/logs/stage/pip_freeze.txt), and specaudit
rm -f .gpu/smoke/*.whl
$PY312 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .gpu/smoke libcst gitpython gitdb smmap
rm -rf "$W/src" && mkdir -p "$W/src" && git archive "${REV:-HEAD}" | tar -C "$W/src" -xf -
python3 -m pip wheel -q --no-deps -w .gpu/smoke "$W/src"
git rev-parse "${REV:-HEAD}" > .gpu/smoke/COMMIT
# 3. the MoE kernels
if [ ! -s .gpu/partM/moe.xz ]; then
  unzip -o -q "$VLLM_DL"/vllm-0.26.0-*.whl 'vllm/_moe_C_stable_libtorch.abi3.so' -d "$W/moe"
  xz -9 -T2 -c "$W/moe/vllm/_moe_C_stable_libtorch.abi3.so" > .gpu/partM/moe.xz
fi
# 4. the pieces: what a call may carry = 64 MiB - the working tree (tracked and untracked-not-ignored) - 2.5 MiB (the
#    device tool counts more than the files' bytes: 66.06 MB in all passed in round 1, 66.19 MB was refused in round 3)
TREE=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s}')
ROOM=$(( 64 * 1048576 - TREE - 5 * 524288 ))
SMOKE=$(du -cb .gpu/smoke/* | tail -1 | cut -f1)
rm -f .gpu/pieces/vllm.*
tar -C .gpu -cf "$W/vllm.tar" partB/rest.tar.xz partA/c.xz partM/moe.xz
FIRST=$(( ROOM - SMOKE ))
head -c $FIRST "$W/vllm.tar" > .gpu/pieces/vllm.00
tail -c +$((FIRST + 1)) "$W/vllm.tar" | split -b $ROOM -d -a 2 --numeric-suffixes=1 - .gpu/pieces/vllm.
sha256sum "$W/vllm.tar" | cut -d" " -f1 > .gpu/smoke/vllm.sha256
{ echo "tree $TREE bytes; room per call $ROOM; .gpu/smoke $SMOKE"; ls -l .gpu/pieces/ .gpu/sglang/; } | tee .gpu/pieces/PLAN

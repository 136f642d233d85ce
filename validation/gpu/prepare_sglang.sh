#!/bin/bash
# Build the one carried part for SGLang 0.5.17 (torch 2.11, CUDA 13) on the lent H200, on the CPU machine (it reaches
# PyPI): SGLANG.md beside this file, "Prepare", as a script. Run from the repository root (.gpu/ must be in
# .git/info/exclude):   PY312=.../python3.12 bash validation/gpu/prepare_sglang.sh [WORKDIR]
# Writes .gpu/sglang/site.tar.xz (~42 MB) and copies tiny_eagle3_gpu.py, grid_models.py and sglang_run.sh beside it.
set -euo pipefail
W=${1:-/tmp/sgl}; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(pwd)
PY312=${PY312:-python3.12}
PLAT=""; for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux_2_31_x86_64 \
  manylinux_2_34_x86_64 manylinux_2_35_x86_64 manylinux2014_x86_64; do PLAT="$PLAT --platform $p"; done
mkdir -p "$W/dl" "$W/site"
$PY312 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d "$W/dl" \
  sglang==0.5.17 sglang-kernel==0.4.5 flashinfer-python==0.6.15.post1 transformers==5.12.1 tokenizers==0.22.2 \
  xgrammar==0.2.1 apache-tvm-ffi==0.1.11 openai==2.6.1 distro jiter sniffio fastapi==0.136.3 starlette annotated-doc \
  uvicorn python-multipart pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection msgspec pyzmq \
  orjson pybase64 partial-json-parser setproctitle dill zstandard compressed-tensors==0.17.0 loguru gguf jsonschema \
  jsonschema-specifications referencing rpds-py soundfile==0.13.1 cffi pycparser ipython ipython-pygments-lexers jedi \
  parso matplotlib-inline traitlets pexpect ptyprocess prompt_toolkit wcwidth stack_data executing asttokens pure_eval \
  decorator
$PY312 -m pip install -q --no-deps --no-compile --no-index --target "$W/site" $(ls "$W"/dl/*.whl | grep -v sglang_kernel)
(cd "$W/site" && unzip -q -o "$W"/dl/sglang_kernel-0.4.5-*.whl 'sgl_kernel/*' 'triton_kernels/*' \
  'sglang_kernel-0.4.5.dist-info/*' -x 'sgl_kernel/flash_ops*' 'sgl_kernel/flashmla_ops*' 'sgl_kernel/infllm_ops*' \
  'sgl_kernel/spatial_ops*' 'sgl_kernel/sm100/*')
rm -rf "$W/site/xgrammar/lib" "$W/site/sglang/multimodal_gen" "$W/site/sglang/test" "$W/site/sglang/benchmark" \
  "$W/site/bin" "$W"/site/sglang/srt/{grpc,server,multimodal}/_core*.so
find "$W/site/xgrammar" "$W/site/zstandard" -name '*.so' -exec strip --strip-debug {} + 2>/dev/null || true
find "$W/site" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$ROOT/.gpu/sglang"
tar -C "$W/site" -cf - . | xz -6 -T2 > "$ROOT/.gpu/sglang/site.tar.xz"
ls -l "$ROOT/.gpu/sglang/site.tar.xz"

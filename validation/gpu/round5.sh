#!/bin/bash
# Round 5 of the GPU differential grid (README.md "Round 5"): the methods' cells of round 5 (cells.py METHOD_CELLS:
# DFlash, DSpark, Medusa, MLPSpeculator, a custom proposer class), as round 4 ran its cells: no Qwen3-MoE or LLaVA
# cell (no partM, no stage1b.sh), partA split so that each call stays under the 64 MiB a call carries beside the
# working tree (~16 MiB).
#
#   bash validation/gpu/round5.sh split   # CPU machine, once the parts are built (prepare_parts.sh): .gpu/partA1, 2
#   bash validation/gpu/round5.sh 1       # device call 1, carry [".gpu/partB", ".gpu/partA1"]: stage1.sh (~35 s)
#   bash validation/gpu/round5.sh 2       # device call 2 within 30 s, carry [".gpu/partA2"]: the cells (~150 s)
#
# Then, here: tar -C validation/gpu/logs -xzf <files_at>/vllm-logs.tar.gz, keep the stage files as
# logs/stage/*-round5*, and run `python validation/gpu/report.py`.
set -u
HERE=$(dirname "$0")
FIRST=7340032  # bytes of .gpu/partA/c.xz carried by call 1 (7 MiB, as round 4)
CELLS_ROUND5="qwen3--dflash qwen3--dflash-fc3x qwen3--dflash-layer-beyond qwen3--dspark qwen3--dspark-block7 \
llama--medusa llama--mlp_speculator llama--custom_class"

case "${1:-}" in
  split)
    set -e
    mkdir -p .gpu/partA1 .gpu/partA2
    head -c $FIRST .gpu/partA/c.xz > .gpu/partA1/c.xz.1
    tail -c +$((FIRST + 1)) .gpu/partA/c.xz > .gpu/partA2/c.xz.2
    ls -l .gpu/partA1/c.xz.1 .gpu/partA2/c.xz.2 .gpu/partB/rest.tar.xz
    ;;
  1)
    # the first piece waits on the warm machine for call 2
    mkdir -p /root/parts && cp .gpu/partA1/c.xz.1 /root/parts/
    bash "$HERE/stage1.sh"
    ;;
  2)
    test -f /root/parts/c.xz.1 || { echo "NO_STAGE: the machine of call 1 was not kept"; exit 3; }
    mkdir -p .gpu/partA && cat /root/parts/c.xz.1 .gpu/partA2/c.xz.2 > .gpu/partA/c.xz
    NEED_MOE=0 CELLS="${CELLS:-$CELLS_ROUND5}" BUDGET=${BUDGET:-450} bash "$HERE/stage2.sh"
    ;;
  *)
    echo "usage: $0 split|1|2" >&2
    exit 2
    ;;
esac

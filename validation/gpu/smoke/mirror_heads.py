#!/usr/bin/env python3
"""What `specaudit smoke`'s own scan can see of two lm_heads (round 4, issue 39): the drafter's and the target's
checkpoints as smoke's preflight mirrors them from the node (remote_probe.checkpoint sends a safetensors file's header
and its small integer tensors only; preflight._mirror_checkpoint writes them into a sparse file of the same size),
against the checkpoints themselves, through the check's own row comparison (scan/drafter/vocab.py _same_rows).

    python validation/gpu/smoke/mirror_heads.py MODELS [DRAFTER]   # MODELS: models.py's output; DRAFTER: drafter-own-head-null

Prints one JSON line. No network; specaudit importable.
"""

from __future__ import annotations

import json
import sys

from specaudit.launch.checkpoint import read_checkpoint
from specaudit.scan.drafter.vocab import _same_rows
from specaudit.smoke import remote_probe
from specaudit.smoke.preflight import _mirror_checkpoint


def heads_same(target, draft) -> bool | None:
    return _same_rows(draft, draft.tensor("lm_head.weight"), target, target.tensor("lm_head.weight"))


def main() -> int:
    models, drafter = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "drafter-own-head-null"
    paths = (f"{models}/target-llama", f"{models}/{drafter}")
    local = [read_checkpoint(p) for p in paths]
    mirrored = [read_checkpoint(str(_mirror_checkpoint(p, remote_probe.checkpoint(p)))) for p in paths]
    print(json.dumps({"drafter": drafter, "same_rows_read_from_the_checkpoints": heads_same(*local),
                      "same_rows_read_from_smokes_mirror": heads_same(*mirrored)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

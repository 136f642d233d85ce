"""The drafter checkpoint against its target and the engine: checks made from two config.json files, the
safetensors headers and the release's own code, before any launch.

Each check is one function, registered with ``@check`` under the name a rule of kind ``drafter_contract`` gives in
``params.check``, in the module of its family; it returns a Finding with the numbers on both sides, or None when it
has nothing to say (e.g. no d2t tensor). A new family is a new module here, imported below.
"""

from . import aux_layers, contract, dflash, fc, heads, mtp, parallel, positions, tokenizer, vocab  # noqa: F401  (each registers its checks)
from .context import CHECKS, LAUNCH_ONLY, OWN_LAYERS, DraftContext, check
from .sglang_dspark import check_dspark_draft_config  # noqa: F401  (SGLang's DSPARK draft)
from .sglang_frozen_kv_mtp import check_frozen_kv_assistant  # noqa: F401  (SGLang's FROZEN_KV_MTP assistant)

__all__ = ["CHECKS", "LAUNCH_ONLY", "OWN_LAYERS", "DraftContext", "check"]

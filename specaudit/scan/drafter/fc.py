"""The EAGLE heads' fc against what the engine builds: ``fc`` takes ``target_hidden_size`` (else ``hidden_size``)
times the states it joins (EAGLE-3: 3 aux states; EAGLE-1: 2), and the target's hidden size against the drafter's
(vLLM's ``llama_eagle3.py``, 0.11 to 0.33; SGLang's drafter modules, played out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.types import Finding, Rule, Status
from .context import DraftContext, check, draft_finding, engine_finding, unread_finding
from .engine_code import release_fc, without_aux


@check("fc_input_width")
def check_fc_input_width(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The checkpoint's fc against the fc the engine builds: a mismatch fails the drafter's weight load."""
    reader = without_aux(ctx)
    if reader is not None:
        return engine_finding(rule, ctx, Status.PASSES, "the drafter config sets eagle_config.use_aux_hidden_state "
                               "false, which this release reads: it builds no fc (the checkpoint's fc.* is skipped)",
                               "eagle_config.use_aux_hidden_state = false", reader)
    fc = ctx.draft.tensor("fc.weight")
    if fc is None:
        return unread_finding(rule, ctx, "the width of fc.weight")
    if len(fc.shape) != 2:
        return None
    engine = rule.params.get("engine") or {}
    if engine.get("builder"):  # the release's own fc, played out on the drafter config (SGLang)
        built, how, _ = release_fc(ctx, str(engine["builder"]))
    else:
        built, how = ctx.fc_inputs(rule.params.get("states"), tuple(rule.params.get("width")
                                                                     or ("target_hidden_size", "hidden_size")))
    evidence = fc.describe()
    if built is None:
        return draft_finding(rule, ctx, Status.UNKNOWN, how, evidence, fc.file)
    if built != fc.shape[1]:
        # model_loader/weight_utils.py default_weight_loader
        return draft_finding(rule, ctx, Status.BLOCKS,
                        f"the engine builds fc with {how} = {built} inputs, the checkpoint's fc.weight has "
                        f"{fc.shape[1]}", evidence, fc.file,
                        f"AssertionError: Attempted to load weight (torch.Size({list(fc.shape)})) into parameter "
                        f"(torch.Size([{fc.shape[0]}, {built}]))")
    return draft_finding(rule, ctx, Status.PASSES, f"fc.weight has the {how} = {built} inputs the engine builds",
                    evidence, fc.file)


@check("target_hidden_size")
def check_target_hidden_size(rule: Rule, ctx: DraftContext) -> Finding | None:
    hidden = ctx.target_text.get("hidden_size")
    declared = ctx.draft_config.get("target_hidden_size")
    key = "target_hidden_size"
    if declared is None:
        declared, key = ctx.draft_config.get("hidden_size"), "hidden_size (no target_hidden_size)"
    if not isinstance(hidden, int) or declared is None:
        return None
    evidence = f"drafter {key} = {declared}; target hidden_size = {hidden}"
    if declared != hidden:
        return draft_finding(rule, ctx, Status.BLOCKS, f"the drafter declares {key} {declared}, the target's is {hidden}",
                        evidence)
    return draft_finding(rule, ctx, Status.PASSES, f"{key} {declared} equals the target's hidden size", evidence)


def layers_lost(asked: Sequence[Any], kept: Sequence[int], noun: str, layers: int, span: str = "") -> list[str]:
    """Why layers asked of the target (``noun``: ids, layers) do not all reach the drafter's fc: one asked twice (the
    target keeps each layer once), or outside the ``layers`` layers whose states it keeps (``span`` says which)."""
    lost = []
    if len(set(asked)) < len(asked):
        lost.append(f"{noun} repeat ({list(asked)}): the target keeps each layer once")
    outside = sorted({i for i in asked if isinstance(i, int) and i not in kept}) + \
        [i for i in asked if not isinstance(i, int)]
    if outside:
        lost.append(f"{noun} {outside} are outside the target's {layers} layers" + (f" ({span})" if span else "")
                    + ": never kept")
    return lost

"""The draft's tensor-parallel size: one the engine refuses, and one it accepts and does not use (a warning: the
drafter still helps, at the target's TP).
"""

from __future__ import annotations

import ast

from ...core.types import Finding, Rule, Status
from .context import DraftContext, as_count, check, draft_finding, engine_finding, site_of, warns
from .engine_code import draft_build, followed, matches_any, reads_name


@check("draft_tensor_parallel")
def check_draft_tensor_parallel(rule: Rule, ctx: DraftContext) -> Finding | None:
    draft_tp = ctx.launch.speculative.get("draft_tensor_parallel_size")
    target_tp = int(ctx.launch.options.get("tensor-parallel-size") or 1)
    if draft_tp is None:
        return None
    evidence = f"draft_tensor_parallel_size = {draft_tp}; tensor_parallel_size = {target_tp}"
    if draft_tp not in (1, target_tp):
        return draft_finding(rule, ctx, Status.BLOCKS, f"the draft TP size must be 1 or the target's ({target_tp})", evidence,
                        error=f"ValueError: speculative_draft_tensor_parallel_size={draft_tp} cannot be other value "
                              "than 1 or target model tensor_parallel_size")
    return draft_finding(rule, ctx, Status.PASSES, "the draft TP size is 1 or the target's", evidence)


@check("draft_tp_ignored")
def check_draft_tp_ignored(rule: Rule, ctx: DraftContext) -> Finding | None:
    """A draft tensor-parallel size other than the target's that the release accepts (``_verify_and_get_draft_tp``:
    1 or the target's) and then does not use: the function that builds the draft on the launch's path (the loaders
    ``params.engine`` names, and what they call on ``self``) hands ``get_model`` a config without the draft's parallel
    config. vLLM 0.14 to 0.33: EAGLE's proposer builds the drafter with ``self.vllm_config`` (V1:
    EagleProposer.load_model / SpecDecodeBaseProposer._get_model and _create_draft_vllm_config) or the target's config
    with kernel overrides (V2: eagle/utils.py load_eagle_model, apply_draft_overrides); only the draft_model method's
    proposer (draft_model.py _create_draft_vllm_config) reads ``draft_parallel_config``."""
    engine, judge = rule.params.get("engine") or {}, ctx.judge
    asked = as_count(ctx.launch.speculative.get("draft_tensor_parallel_size"))
    target_tp = int(ctx.launch.options.get("tensor-parallel-size") or 1)
    if judge is None or asked is None or asked == target_tp or asked != 1:
        return None  # nothing to ignore; a size other than 1 or the target's is refused (draft_tensor_parallel)
    files = list(engine.get("files") or ())
    loaders = [f for f in judge.engine_functions(engine.get("loaders") or (), files) if f.on_path and matches_any(f.file, files)]
    for loader in loaders:
        chain = followed(judge, loader, set(engine.get("follow") or ()), list(engine.get("follow_files") or ()))
        build = draft_build(chain, str(engine.get("builder") or "get_model"), "draft_model_config")
        if build is None:
            continue
        fn, call = build
        evidence = f"draft_tensor_parallel_size = {asked}; tensor_parallel_size = {target_tp}; {site_of(fn)} builds " \
                   f"the draft: {' '.join(ast.unparse(call).split())}"
        reader = reads_name(chain, set(engine.get("reads") or ("draft_parallel_config",)))
        if reader is not None:
            return engine_finding(rule, ctx, Status.PASSES, f"the release builds the draft with its own parallel "
                                   f"config (read in {site_of(reader)}): TP {asked}", evidence, fn)
        return warns(rule, ctx,
                     f"the release accepts draft_tensor_parallel_size = {asked} and builds the draft with the target's "
                     f"parallel config (nothing from {site_of(loader)} on reads the draft's): the drafter runs sharded "
                     f"over the target's {target_tp} GPUs, with no error and no log line",
                     f"acceptance unchanged; each draft step runs at TP {target_tp}, not {asked}, paying the "
                     "all-reduces the draft TP was asked to avoid (a smaller speed-up)", evidence, fn)
    return None

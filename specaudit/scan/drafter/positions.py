"""The draft's context against the target's: a drafter with fewer positions than the served length fails (its
rotary cache is too short, vllm #48894), unless the release raises the draft's max positions to the target's itself
(vLLM 0.32 on): then the launch runs, and longer requests lose what the head was never trained at (a warning).
"""

from __future__ import annotations

from ...core.types import Finding, Rule, Status
from .context import DraftContext, check, draft_finding, engine_finding, site_of, warns
from .engine_code import positions_guard, positions_raised, rope_types


@check("max_positions")
def check_max_positions(rule: Rule, ctx: DraftContext) -> Finding | None:
    positions = ctx.draft_config.get("max_position_embeddings")
    requested = ctx.launch.options.get("max-model-len") or ctx.target_text.get("max_position_embeddings")
    if positions is None or requested is None:
        return None
    if ctx.judge is not None and positions_raised(ctx.judge):
        return None  # the release raises the draft's positions to the served length: draft_context says what it costs
    requested = int(requested)
    evidence = f"drafter max_position_embeddings = {positions}; max model len = {requested}"
    if positions < requested:
        return draft_finding(rule, ctx, Status.BLOCKS,
                        f"the drafter's rotary cache covers {positions} positions, the launch serves up to {requested}: "
                        f"positions past {positions} index out of bounds", evidence)
    return draft_finding(rule, ctx, Status.PASSES, f"{positions} positions cover the max model len {requested}", evidence)


@check("draft_context")
def check_draft_context(rule: Rule, ctx: DraftContext) -> Finding | None:
    """A drafter whose context (its config's max_position_embeddings) is shorter than the served length, on a release
    that raises it to the served length instead of failing (``positions_raised``): the launch runs, and past that
    position the head drafts at positions it was never trained at: a warning, with the share of the served length the
    drafter covers (every shorter request drafts as trained). Where the release does not raise it, the rotary cache is
    too small and ``max_positions`` blocks."""
    positions = ctx.draft_config.get("max_position_embeddings")
    requested = ctx.launch.options.get("max-model-len") or ctx.target_text.get("max_position_embeddings")
    if not isinstance(positions, int) or requested is None or ctx.judge is None:
        return None
    raised = positions_raised(ctx.judge)
    if raised is None:
        return None
    requested = int(requested)
    evidence = f"drafter max_position_embeddings = {positions}; max model len = {requested}; {site_of(raised)} " \
               "raises the draft's to the max model len"
    if positions >= requested:
        return engine_finding(rule, ctx, Status.PASSES, f"the drafter's {positions} positions cover the max model len "
                               f"{requested}", evidence, raised)
    guard = positions_guard(ctx.judge, raised)
    raises_for, default = guard or (frozenset(), "default")
    kept = [t for t in rope_types(ctx.draft_config, default) if t not in raises_for] if guard else []
    # A partial loss: every request shorter than the drafter's context drafts as trained, only longer ones lose.
    share = f"{positions} of the {requested} positions served ({positions / requested:.0%})"
    if kept:  # the release leaves this draft's positions as they are: the served length gives way instead
        return warns(rule, ctx,
                     f"the drafter's context is {positions} positions and the launch serves {requested}: the release "
                     f"raises a draft's positions only for the rope types {', '.join(sorted(raises_for))}, and this "
                     f"drafter's is {', '.join(kept)} (its rotary frequencies depend on the length); so past position "
                     f"{positions} the launch does not speculate as asked (vLLM 0.33: Model Runner V2 lowers the max "
                     "model len to the draft's, V1 stops drafting for longer sequences)",
                     f"speculation as trained on {share}; requests longer than {positions} tokens are not drafted for "
                     "(or not served) past that", f"{evidence}, except for rope types outside {sorted(raises_for)}; "
                     f"drafter rope type {', '.join(kept)}", raised)
    return warns(rule, ctx,
                 f"the drafter's context is {positions} positions and the launch serves {requested}: the release raises "
                 f"the draft's max_position_embeddings to {requested} (no error), and past position {positions} the "
                 "head drafts at positions it was never trained at",
                 f"requests within {share} draft as trained; acceptance falls only on the positions past {positions} "
                 "of longer requests", evidence, raised)

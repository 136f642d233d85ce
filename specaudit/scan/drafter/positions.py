"""The draft's context against the target's: a drafter with fewer positions than the served length fails
or degrades, unless the release raises the draft's max positions to the target's itself (vLLM 0.32 on).
"""

from __future__ import annotations

from ...core.types import Finding, Rule, Status
from .context import DraftContext, check, draft_finding, engine_finding, site_of
from .engine_code import positions_raised


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
    position the head drafts at positions it was never trained at. Where the release does not raise it, the rotary
    cache is too small and ``max_positions`` blocks."""
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
    return engine_finding(rule, ctx, Status.DEGRADES,
                           f"the drafter's context is {positions} positions and the launch serves {requested}: the "
                           f"release raises the draft's max_position_embeddings to {requested} (no error), and past "
                           f"position {positions} the head drafts at positions it was never trained at, so acceptance "
                           "falls on every request longer than that", evidence, raised)

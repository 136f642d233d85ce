"""What every drafter check shares: the launch and the drafter checkpoint it reads (``DraftContext``), the
registry of checks by the name a rule's ``params.check`` gives (``@check``), and the Finding a check returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.types import EngineFunction, Finding, Rule, Status
from ...launch.checkpoint import Checkpoint
from ..judge import Judge

if TYPE_CHECKING:
    from ...launch.request import Launch


DEFAULT_AUX_LAYERS = "(2, L // 2, L - 3)"


@dataclass(frozen=True)
class DraftContext:
    launch: Launch
    draft: Checkpoint
    weights: bool = True  # False: a draft of the target's own layers whose checkpoint is not here (a preset)
    judge: Judge | None = None  # the release's code, for the checks that read what the engine does with the files

    @property
    def target_text(self) -> dict:
        target = self.launch.target
        if target is None:
            return {}  # no target (a landscape scan judges no drafter): nothing of the target's to check against
        return target.text_config

    @property
    def draft_config(self) -> dict:
        return self.draft.config

    def aux_layers(self) -> tuple[list[int], str]:
        declared = self.draft_config.get("eagle_aux_hidden_state_layer_ids")
        if declared is None:
            declared = (self.draft_config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        if declared is not None:
            return list(declared), "eagle_aux_hidden_state_layer_ids of the drafter config"
        layers = self.target_text.get("num_hidden_layers")
        if not isinstance(layers, int):
            return [], "the target config has no num_hidden_layers"
        return [2, layers // 2, layers - 3], f"the default {DEFAULT_AUX_LAYERS} for L = {layers}"


    def fc_inputs(self, states: int | None = None, width: tuple[str, ...] = ("target_hidden_size", "hidden_size")
                  ) -> tuple[int | None, str]:
        """The input width of the fc the engine builds, and how: the first of the ``width`` keys of the drafter
        config times the number of states fc joins. That number is ``states`` where the head fixes it (EAGLE-1: the
        token's embedding and the target's last hidden state, 2); for EAGLE-3 the number of aux states: 3, and from
        vLLM 0.22 on, num_aux_hidden_states or the length of eagle_config's aux ids when the config gives one."""
        config = self.draft_config
        hidden = next((config[k] for k in width if config.get(k)), None)
        if not isinstance(hidden, int):
            return None, f"the drafter config has none of {', '.join(width)}"
        if states is not None:
            return hidden * states, f"{hidden} x {states}"
        declared = config.get("num_aux_hidden_states")
        if declared is None:
            declared = len((config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or ()) or None
        if declared not in (None, 3):
            return None, (f"the drafter config asks for {declared} aux states: releases before vLLM 0.22 build fc "
                          f"for 3, later ones for {declared}")
        return hidden * 3, f"{hidden} x 3"


Check = Callable[[Rule, DraftContext], Finding | None]


CHECKS: dict[str, Check] = {}  # what a rule's params.check names: filled by @check below


OWN_LAYERS: set[str] = set()  # the checks whose draft is layers of the target's own checkpoint (MTP)


LAUNCH_ONLY: set[str] = set()  # the checks of what a launch names in a drafter's place (a custom proposer class)


def check(name: str, own_layers: bool = False, launch_only: bool = False) -> Callable[[Check], Check]:
    """Register a check under the name rules give it; ``own_layers``: it reads the target's checkpoint as the
    draft's (the draft of MTP is the target's extra layers); ``launch_only``: it reads no checkpoint, and runs on a
    launch that has none (its DraftContext's draft is empty, named by the launch's model)."""

    def register(function: Check) -> Check:
        CHECKS[name] = function
        if own_layers:
            OWN_LAYERS.add(name)
        if launch_only:
            LAUNCH_ONLY.add(name)
        return function

    return register


def draft_finding(rule: Rule, ctx: DraftContext, status: Status, why: str, evidence: str, file: str | None = None,
             error: str | None = None) -> Finding:
    # Shards sit in the checkpoint directory: name them under the path the user gave (host:path for a remote one).
    shown = f"{ctx.draft.path}/{Path(file).name if file else 'config.json'}"
    return Finding(rule.id, rule.title, rule.phase, status, shown, 0, evidence,
                   error, why, rule.hint)


def engine_finding(rule: Rule, ctx: DraftContext, status: Status, why: str, evidence: str, fn: EngineFunction | None,
                    error: str | None = None) -> Finding:
    """A finding placed at the engine's code that decides it (a finding about the drafter's files: at config.json)."""
    if fn is None:
        return draft_finding(rule, ctx, status, why, evidence, error=error)
    return Finding(rule.id, rule.title, rule.phase, status, fn.file, fn.line, evidence, error, why, rule.hint)


def degrades(rule: Rule, ctx: DraftContext, why: str, predicts: str, evidence: str,
             fn: EngineFunction | None = None, file: str | None = None) -> Finding:
    """A finding that the drafter can help no request (DEGRADED): it says the acceptance it predicts, and why; placed
    at the engine's code that decides it, else at the drafter's ``file`` (its config.json where none is named)."""
    why = f"{why}; predicted acceptance: {predicts}"
    if fn is None:
        return draft_finding(rule, ctx, Status.DEGRADES, why, evidence, file)
    return engine_finding(rule, ctx, Status.DEGRADES, why, evidence, fn)


def warns(rule: Rule, ctx: DraftContext, why: str, figure: str, evidence: str,
          fn: EngineFunction | None = None) -> Finding:
    """A partial loss (a warning, not a verdict): the drafter helps, less than it could, and ``figure`` says how much."""
    return engine_finding(rule, ctx, Status.WARNS, f"{why}; the loss: {figure}", evidence, fn)


def unread_finding(rule: Rule, ctx: DraftContext, what: str) -> Finding | None:
    """Where weight files of the drafter could not be read (a legacy .bin), what was not checked for it."""
    if not ctx.draft.unread:
        return None
    file, why = next(iter(ctx.draft.unread.items()))
    more = f" (and {len(ctx.draft.unread) - 1} more file(s))" if len(ctx.draft.unread) > 1 else ""
    return draft_finding(rule, ctx, Status.UNKNOWN, f"{what} not checked: the tensors of {Path(file).name}{more} could not "
                    f"be read ({why})", f"{Path(file).name}: {why}", file)


def site_of(fn: EngineFunction) -> str:
    return f"{fn.file}:{fn.line} {fn.name}"


def as_count(value: object) -> int | None:
    """A count a launch gives (a number, or its digits from a command line's dotted form); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None

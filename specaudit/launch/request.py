"""What a launch asks for: its target, its speculative method as the user names it, its drafter, and the engine
arguments it sets. How the engine resolves the method is the methods stage's (specaudit/methods/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import SpecauditError
from .checkpoint import Checkpoint
from .hub import is_hub_id, read_checkpoint_anywhere
from .target import Target, load_model, load_preset, presets

if TYPE_CHECKING:
    from .command import LaunchCommand

DEFAULT_METHOD = "eagle3"  # a scan given a target and no speculative config audits an EAGLE-3 launch


@dataclass(frozen=True)
class Launch:
    """What the launch asks for: the target, the speculative method, and the drafter."""

    target: Target | None
    # The method as the launch names it, lower case (None: it names none, and the engine infers it); a scan judges
    # the launch with the method the release resolves it to (methods/resolve.py).
    method: str | None = DEFAULT_METHOD
    engine: str | None = None  # the engine whose launch command gave `options`
    draft: str | None = None  # the drafter's path, as named
    drafter: Checkpoint | None = None  # the drafter checkpoint, when it could be read here
    speculative: dict[str, Any] = field(default_factory=dict)  # the speculative config, as given
    options: dict[str, Any] = field(default_factory=dict)  # other engine arguments, as given
    env: dict[str, str] = field(default_factory=dict)  # the launch command's environment (VLLM_USE_V2_MODEL_RUNNER=1)
    # The target's safetensors headers, where its checkpoint is here (a directory or a Hub id): a draft of the
    # target's own layers (MTP) loads from them. Else why they were not read ("" for a preset, which has none).
    target_weights: Checkpoint | None = None
    target_weights_problem: str = ""

    @property
    def named_draft(self) -> Any:
        """The draft the launch names: its speculative config's model, else --draft; None where it names none."""
        return self.speculative.get("model") or self.draft


def method_of(speculative: dict[str, Any]) -> str | None:
    """The method as the launch names it, lower case; None where the launch sets speculative decoding up without
    naming one (the engine infers it: methods/); the default where it sets nothing up (a scan given a target only,
    or a drafter only, audits an EAGLE-3 launch)."""
    if speculative.get("method"):
        return str(speculative["method"]).lower()
    return None if speculative else DEFAULT_METHOD


def parse_speculative_config(text: str) -> dict[str, Any]:
    from .command import check_speculative, json_option

    return check_speculative(json_option("speculative-config", text))


def launch_of(command: LaunchCommand | None, preset: str | None = None, model_dir: str | None = None,
              revision: str | None = None, draft_dir: str | None = None, spec_json: str | None = None) -> Launch | None:
    """The launch to judge, from a scan's options and/or a launch command; None for a landscape scan."""
    speculative = parse_speculative_config(spec_json) if spec_json else {}
    options: dict = {}
    if command is not None:
        options = command.options
        speculative = {**command.speculative, **speculative}  # each checked where it was read
        if (preset is not None or model_dir) and command.model:
            raise SpecauditError(f"the launch command names its model ({command.model}): drop --target/--model, or the command's")
        model_dir = model_dir or command.model
        revision = revision or options.get("revision")
    if preset is not None and model_dir:
        raise SpecauditError("give --target or --model, not both")
    if preset is not None and not preset.strip():
        raise SpecauditError(f"--target needs a preset name ({', '.join(presets())})")
    if revision and not model_dir:
        raise SpecauditError("--revision is the revision of --model (a Hub id): name the model")
    target = load_preset(preset) if preset is not None else load_model(model_dir, revision) if model_dir else None
    draft = draft_dir or speculative.get("model")
    # A drafter named with --draft must be readable; one named by a launch command may live on another
    # machine, and is checked only when its directory is here, or when it is a Hub id (read as the engine would).
    drafter = read_checkpoint_anywhere(draft, speculative.get("revision")) \
        if draft and (draft_dir or Path(draft).is_dir() or is_hub_id(draft)) else None
    if target is None:
        if command is not None or speculative or draft:
            raise SpecauditError("a launch needs a target: --target NAME, --model DIR, or a launch command with --model")
        return None
    # The target's safetensors headers: a launch naming no drafter may draft with the target's own layers (MTP),
    # which load from them (a Hub id's by range requests); a drafter of its own is held against the target's head
    # where the engine replaces the drafter's by it (drafter/vocab.py), read where the target is a directory here.
    weights, problem = None, ""
    if model_dir and (speculative or draft) and (not draft or Path(model_dir).is_dir()):
        try:
            weights = read_checkpoint_anywhere(model_dir, revision)
        except SpecauditError as exc:
            problem = str(exc)
    return Launch(target=target, method=method_of(speculative), engine=command.engine if command else None,
                  draft=draft, drafter=drafter, speculative=speculative, options=options, target_weights=weights,
                  target_weights_problem=problem, env=command.env if command else {})

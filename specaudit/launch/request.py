"""What a launch asks for: its target, its speculative method as the user names it, its drafter, and the engine
arguments it sets. How the engine resolves the method is the methods stage's (specaudit/methods/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .checkpoint import Checkpoint
from .target import Target

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

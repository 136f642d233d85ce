"""What is being launched: the target model's config, the drafter, and the speculative method.

A target comes from a checkpoint directory's ``config.json`` (``--model``), from a bundled preset
(``--target``: a small snapshot of the keys gates read), or from a launch command (see launch.py).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from .checkpoint import Checkpoint, read_config
from .errors import SpecauditError

DEFAULT_METHOD = "eagle3"


@dataclass(frozen=True)
class Target:
    name: str  # the preset name or the checkpoint directory
    source: str  # where the config was read from
    config: dict[str, Any]  # the whole config.json
    notes: tuple[str, ...] = ()  # what the user should know about where it came from

    @property
    def text_config(self) -> dict[str, Any]:
        """The language model's config, as vLLM's get_hf_text_config picks it."""
        nested = self.config.get("text_config")
        return nested if isinstance(nested, dict) else self.config

    @property
    def architectures(self) -> list[str]:
        return list(self.config.get("architectures") or [])

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))

    @property
    def text_model_type(self) -> str:
        return str(self.text_config.get("model_type", ""))

    def config_value(self, path: str) -> tuple[bool, Any]:
        """Whether ``config.<path>`` exists (dotted path through nested configs), and its value."""
        node: Any = self.config
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False, None
            node = node[part]
        return True, node


@dataclass(frozen=True)
class Launch:
    """What the launch asks for: the target, the speculative method, and the drafter."""

    target: Target | None
    method: str = DEFAULT_METHOD  # lower case, as vLLM spells it
    engine: str | None = None  # the engine whose launch command gave `options`
    draft: str | None = None  # the drafter's path, as named
    drafter: Checkpoint | None = None  # the drafter checkpoint, when it could be read here
    speculative: dict[str, Any] = field(default_factory=dict)  # the speculative config, as given
    options: dict[str, Any] = field(default_factory=dict)  # other engine arguments, as given


def method_of(speculative: dict[str, Any], draft: str | None) -> str:
    """The speculative method, lower case; without one, what vLLM's SpeculativeConfig infers from the drafter's path."""
    if speculative.get("method"):
        return str(speculative["method"]).lower()
    name = (draft or "").lower()
    if "eagle3" in name:
        return "eagle3"
    if "eagle-" in name:
        return "eagle"
    return DEFAULT_METHOD


def presets() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("specaudit.presets").iterdir() if p.name.endswith(".json"))


def load_preset(name: str) -> Target:
    """A bundled target, by its name or its Hub id; where the local Hub cache holds that repository, a config that
    has drifted from the bundled snapshot is noted."""
    wanted = name.lower().replace("_", "-")
    known = presets()
    wanted = next((p for p in known if _preset_config(p).get("_hub", "").lower() == name.lower()), wanted)
    if wanted not in known:
        close = difflib.get_close_matches(wanted, known, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(close)}?" if close else f"; known presets: {', '.join(known)}"
        raise SpecauditError(f"unknown target preset {name!r}{hint}")
    config = _preset_config(wanted)
    return Target(name=wanted, source=f"preset {wanted}", config=config, notes=_drift(config))


def _preset_config(name: str) -> dict[str, Any]:
    return json.loads(resources.files("specaudit.presets").joinpath(f"{name}.json").read_text())


def _drift(preset: dict[str, Any]) -> tuple[str, ...]:
    """The keys of a preset whose value the Hub cache's config.json of its repository no longer has."""
    from .hub import cached_config

    repo = preset.get("_hub")
    found = cached_config(repo) if repo else None
    if found is None:
        return ()
    path, cached = found
    changed = sorted(k for k, v in preset.items() if not k.startswith("_") and cached.get(k, _ABSENT) != v)
    if not changed:
        return ()
    return (f"the Hub cache's config.json of {repo} ({path}) differs from the bundled preset in "
            f"{', '.join(changed)}: the scan reads the preset; --model {repo} reads the cached config",)


_ABSENT = object()


def load_model(name: str, revision: str | None = None) -> Target:
    """A target named as the engine takes it: a checkpoint directory, or a Hub id at a revision (hub.py)."""
    from .hub import resolve_model

    found = resolve_model(name, revision)
    source = str(found.directory / "config.json")
    if found.where != "a local directory":
        source += f", from {found.where}"
    return Target(name=found.label, source=source, config=read_config(str(found.directory)))


def parse_speculative_config(text: str) -> dict[str, Any]:
    from .launch import json_option

    return check_speculative(json_option("speculative-config", text))


# The keys of a speculative config the scan reads, with the types the engines' own parsers require.
_SPECULATIVE_TYPES = {"method": str, "model": str, "revision": str, "num_speculative_tokens": int,
                      "draft_tensor_parallel_size": int}


def check_speculative(config: dict[str, Any]) -> dict[str, Any]:
    """A speculative config whose keys have the types the engine requires: a wrong one is bad input, not a
    launch to judge."""
    for key, kind in _SPECULATIVE_TYPES.items():
        value = config.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise SpecauditError(f"speculative config: {key} must be {'a string' if kind is str else 'an integer'}, "
                                 f"not {json.dumps(value)}")
    return config

"""The target model of a launch: its config.json, from a checkpoint, the Hub, or a bundled preset.

A target comes from a checkpoint directory's ``config.json`` (``--model``), from a bundled preset
(``--target``: a small snapshot of the keys gates read), or from a launch command (see launch.py).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..core.errors import SpecauditError
from .checkpoint import read_config


@dataclass(frozen=True)
class Target:
    name: str  # the preset name or the checkpoint directory
    source: str  # where the config was read from
    config: dict[str, Any]  # the whole config.json
    notes: tuple[str, ...] = ()  # what the user should know about where it came from
    directory: str = ""  # the checkpoint directory on this machine, where there is one (its tokenizer is read there)

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


def presets() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("specaudit.launch.presets").iterdir() if p.name.endswith(".json"))


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
    return json.loads(resources.files("specaudit.launch.presets").joinpath(f"{name}.json").read_text())


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
    return Target(name=found.label, source=source, config=read_config(str(found.directory)), directory=str(found.directory))

"""A guard's names as what a launch sets: a flag, a key of ``--speculative-config``, a key of a checkpoint's
``config.json``, an environment variable. The flags are the fields of the release's own argument classes
(vLLM's ``EngineArgs`` and ``SpeculativeConfig``, SGLang's ``ServerArgs``), read from its source with the
templates; a name that is none of these is no knob, and its remedy is not offered as a fix.
"""

from __future__ import annotations

import re

_CALLED_ENV = re.compile(r"""^os\.(?:getenv|environ\.get)\(\s*['"](?P<name>\w+)['"]""")
_ENV = re.compile(r"^(?:VLLM|SGLANG|SGL)_[A-Z0-9_]+$")
_CHECKPOINT = ("hf_config", "hf_text_config", "text_config")


def knob_of(name: str, function: str, fields: dict[str, frozenset[str]]) -> str | None:
    """What ``name`` (a guard's expression, read in ``function``) is to the person launching, in words."""
    called = _CALLED_ENV.match(name)
    if called:
        return f"the environment variable {called['name']}"
    parts = name.split(".")
    tail = parts[-1]
    if _ENV.match(tail):
        return f"the environment variable {tail}"
    checkpoint = next((i for i, p in enumerate(parts) if p in _CHECKPOINT), None)
    if checkpoint is not None and checkpoint < len(parts) - 1:
        whose = "the drafter's" if any("draft" in p for p in parts[:checkpoint]) else "the model's"
        return f"`{tail}` in {whose} config.json"
    speculative = fields.get("SpeculativeConfig", frozenset())
    in_speculative = parts[0] == "self" and function.startswith("SpeculativeConfig.") or \
        "speculative_config" in parts[:-1]
    if in_speculative and tail in speculative and not tail.endswith("_config"):  # a *_config: the engine's to set
        return f'--speculative-config key "{tail}"'
    if tail in fields.get("EngineArgs", frozenset()) | fields.get("ServerArgs", frozenset()) and \
            _of_the_launch(parts, function):
        return "--" + tail.replace("_", "-")
    return None


def _of_the_launch(parts: list[str], function: str) -> bool:
    """Whether the name is read off the launch's configuration (``self`` of a config or arguments class, a
    ``*_config`` or ``*args`` object, SGLang's hooks' ``cfg``), not off a kernel's or a layer's own attribute of the same name."""
    owner = function.partition(".")[0] if parts[0] == "self" else ""
    return owner.endswith(("Config", "Args")) or parts[0] == "cfg" or \
        any(p.endswith(("_config", "args")) for p in parts[:-1])

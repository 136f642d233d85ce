"""The values engine code is played on: Python's own, the engine objects a player stands in for, and one unknown.

A value the launch does not fix is an ``Unknown`` that says why (``Unknown("self.model (not bound)")``); ``UNKNOWN``
is the one that gives no reason, for where the reason is plain from the context. Every player and every evaluator of
engine code answers with these, so that what one plays out another can read without translating.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CLASS = "__class__"  # the key of an object's class ("module:Class") in the dict that stands for it


@dataclass(frozen=True)
class Unknown:
    """A value that cannot be known before launch; ``why`` names what was not understood."""

    why: str = ""

    def __repr__(self) -> str:
        return f"<unknown: {self.why}>" if self.why else "<unknown>"

    def __deepcopy__(self, memo: dict[int, Any]) -> Unknown:
        return self  # immutable: a way's copy of an object may share it


UNKNOWN = Unknown()


@dataclass(frozen=True)
class ReleaseClass:
    """A class of the release, as a value (``config_cls = get_method_config_class(self)``): its methods, class
    attributes and bases are read from its source; calling it builds an object of it."""

    name: str  # "module:Class"

    @property
    def module(self) -> str:
        return self.name.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.name.partition(":")[2]


@dataclass(frozen=True)
class ReleaseModule:
    """A module of the release, as a value (``importlib.import_module(name)``): its attributes are its names."""

    name: str  # dotted


class ConfigObject(dict[str, Any]):
    """A transformers config object (``PretrainedConfig``) as the engine holds one: its attributes are its keys. A
    dict to the player, not to the engine's ``isinstance(config, dict)``. One of a class of the release (vLLM's
    EAGLEConfig) carries ``CLASS`` too; ``open``: a statement not played may have set attributes it does not list, so
    an attribute it lacks is not known to be missing."""

    open = False

    @classmethod
    def of(cls, config: Any) -> Any:
        """A checkpoint's config.json as transformers loads it: its nested configs (a dict with a ``model_type``: a
        ``text_config``) are config objects too; other dicts stay dicts (``quantization_config``)."""
        if not isinstance(config, dict) or isinstance(config, ConfigObject):
            return config
        return cls({key: cls.of(value) if isinstance(value, dict) and "model_type" in value else value
                    for key, value in config.items()})


class EngineObject:
    """A value that stands for an object of the engine (its model, a config, a class): true, whatever it holds."""


class Raised(Exception):
    """Playing an expression or a call meets what the engine meets on the launch's values: an exception (``error``
    as Python prints it); ``site``: the file, line and code of the raise, where it is in a function followed."""

    def __init__(self, error: str, site: tuple[str, int, str] | None = None):
        super().__init__(error)
        self.error = error
        self.site = site


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown)


def known(value: Any, within: frozenset[int] = frozenset()) -> bool:
    """Whether nothing in ``value`` is unknown: it, a dict's keys and values, a sequence's items (``{"n": x}`` of an
    ``x`` not known is a dict, but not one whose text is known). ``within``: the containers it is in."""
    if isinstance(value, Unknown):
        return False
    if id(value) in within or not isinstance(value, (dict, list, tuple, set, frozenset)):
        return True
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
    return all(known(item, within | {id(value)}) for item in items)


def truth(value: Any) -> bool | Unknown:
    """``bool(value)`` as the engine's ``if`` takes it: an engine object is true; an unknown stays unknown."""
    if isinstance(value, Unknown):
        return value
    if isinstance(value, (EngineObject, ReleaseClass, ReleaseModule)) or (isinstance(value, dict) and CLASS in value):
        return True
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - a value whose __bool__ fails: not the engine's to judge here
        return Unknown(f"bool() of {type(value).__name__}")

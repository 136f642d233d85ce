"""The methods as data: how each engine resolves a launch's method (``rules/methods/<engine>.yaml``), and the
methods specaudit models (``rules/methods/<engine>/<method>.yaml``). Format: rules/README.md, "Methods"."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.data import YAML_LOADER, rules_dir
from ..core.errors import SpecauditError

# What a binding may stand for: the launch's own values, as methods/resolve.py computes them.
LAUNCH_FACTS = ("method", "model", "num_speculative_tokens", "target_path", "draft_path", "draft_architectures",
                "draft_model_type", "draft_config", "draft_hf_config", "target_model_config", "target_model_type",
                "target_text_model_type", "target_architectures", "model_is_class_path", "draft_model_config",
                "target_vocab_size", "draft_vocab_size", "target_parallel_config")

# A binding to `installed:<module>`: whether the environment the engine runs in can import that module (an optional
# package the engine checks for, such as suffix decoding's arctic_inference).
INSTALLED = "installed:"


@dataclass(frozen=True)
class Resolver:
    """A function of the engine that sets the method: the first of ``functions`` the release defines is played out."""

    functions: tuple[str, ...]  # "module:Class.method" or "module:function"
    variable: str  # the expression holding the method there
    tracked: tuple[str, ...] = ()  # other expressions it assigns and reads back
    returns: bool = False  # it returns the method, rather than setting ``variable``


@dataclass(frozen=True)
class Alias:
    """Names the engine maps to a method where it looks the method up (SGLang's ``from_string``)."""

    names: str  # "module:NAME" of a set of strings
    method: str


@dataclass(frozen=True)
class DraftRewrite:
    """The engine's function that rewrites the draft's config (vLLM's ``hf_config_override``: a DeepSeek-V3 target's
    config into its MTP draft's), played out on the drafter's (or the target's) config.json."""

    functions: tuple[str, ...]  # "module:Class.method" or "module:function"; the first the release defines
    config: str = "hf_config"  # the parameter, or the field of the method's object, that holds the config
    fields: dict[str, Any] = field(default_factory=dict)  # the other fields of that object a draft's build fixes


@dataclass(frozen=True)
class EngineMethods:
    """How an engine resolves a launch's method."""

    engine: str
    listed_in: tuple[str, ...]  # "module:Name" of the Literal alias or Enum that lists the methods; the first found
    case: str  # "lower" or "upper": how the engine spells a method before it looks it up
    checked: str  # "requested" (the method as named is validated) or "resolved" (it is looked up once resolved)
    resolvers: tuple[Resolver, ...]
    bindings: dict[str, str]  # engine expression -> launch fact
    aliases: tuple[Alias, ...]
    draft_config: DraftRewrite | None  # how the engine builds the draft's config from a checkpoint's
    fields: tuple[str, ...]  # "module:Class" whose declared fields the launch's speculative config sets
    classes: dict[str, tuple[str, ...]]  # an object fact -> "module:Class" candidates: the release's class it is
    # A model config's attribute that the engine's registry reads off the checkpoint's model class -> that class
    # attribute (vLLM 0.34: `ModelConfig.speculator_config_class`, `_ModelInfo` of the registered class).
    model_attributes: dict[str, str]
    stage: str  # where in a launch the method is resolved and checked, for the report
    error: str  # what the engine raises for a method it does not have
    source: str
    # "module:Class.method" of the release's API through which a plugin loaded at launch registers a method of its own
    # (SGLang's SpeculativeAlgorithm.register): where the release has it, a method not in its list may be a plugin's.
    plugins: tuple[str, ...] = ()
    # "module:Class.method" of the function that turns the launch's speculative config into the fields' arguments:
    # where it rewrites the keys' `-` as `_` (a comprehension of `k.replace("-", "_")`), `num-speculative-tokens` is
    # `num_speculative_tokens`; elsewhere such a key is a field of that spelling, which the class may refuse.
    keys_from: tuple[str, ...] = ()


@dataclass(frozen=True)
class Method:
    """A method specaudit models for an engine: its path, its rules and its drafter checks are the ones that name it."""

    name: str  # lower case, as the result and the reports name it
    engine: str
    title: str
    # "checkpoint" (a separate drafter), "target" (layers of the target's own checkpoint), "either", "none"
    drafter: str
    contract: dict[str, str]  # what the target class needs: protocol, and the preset whose calls stand in for it
    source: str


def load_engine_methods(engine: str, directory: Path | None = None) -> EngineMethods:
    path = (directory or rules_dir() / "methods") / f"{engine}.yaml"
    data = _read(path)
    try:
        bindings = {str(k): str(v) for k, v in (data.get("bindings") or {}).items()}
        unknown = sorted(v for v in set(bindings.values()) - set(LAUNCH_FACTS) if not v.startswith(INSTALLED))
        if unknown:
            raise ValueError(f"bindings to {unknown}, which are not launch facts ({', '.join(LAUNCH_FACTS)})")
        untyped = sorted(set(data.get("classes") or {}) - set(LAUNCH_FACTS))
        if untyped:
            raise ValueError(f"classes of {untyped}, which are not launch facts")
        return EngineMethods(
            engine=engine,
            listed_in=tuple(data["listed_in"]),
            case=str(data.get("case", "lower")),
            checked=str(data.get("checked", "requested")),
            resolvers=tuple(Resolver(tuple(_list(r["function"])), str(r["method"]), tuple(r.get("tracked") or ()),
                                     bool(r.get("returns", False)))
                            for r in data.get("resolvers") or ()),
            bindings=bindings,
            aliases=tuple(Alias(str(a["names"]), str(a["method"])) for a in data.get("aliases") or ()),
            draft_config=DraftRewrite(tuple(_list(data["draft_config"]["function"])),
                                      str(data["draft_config"].get("config", "hf_config")),
                                      dict(data["draft_config"].get("fields") or {}))
            if data.get("draft_config") else None,
            fields=tuple(_list(data["fields"])) if data.get("fields") else (),
            classes={str(k): tuple(_list(v)) for k, v in (data.get("classes") or {}).items()},
            model_attributes={str(k): str(v) for k, v in (data.get("model_attributes") or {}).items()},
            stage=str(data["stage"]),
            error=" ".join(str(data["error"]).split()),
            source=str(path),
            plugins=tuple(_list(data["plugins"])) if data.get("plugins") else (),
            keys_from=tuple(_list(data["keys_from"])) if data.get("keys_from") else (),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecauditError(f"{path}: malformed methods file ({type(exc).__name__}: {exc})") from None


def load_methods(engine: str, directory: Path | None = None) -> dict[str, Method]:
    """The methods specaudit models for the engine, by name."""
    found: dict[str, Method] = {}
    for path in sorted(((directory or rules_dir() / "methods") / engine).glob("*.yaml")):
        data = _read(path)
        try:
            method = Method(str(data["method"]).lower(), str(data["engine"]), str(data["title"]), str(data["drafter"]),
                            {str(k): str(v) for k, v in (data.get("contract") or {}).items()}, str(path))
        except (KeyError, TypeError) as exc:
            raise SpecauditError(f"{path}: malformed method file ({type(exc).__name__}: {exc})") from None
        if method.engine != engine or method.drafter not in ("checkpoint", "target", "either", "none"):
            raise SpecauditError(f"{path}: engine must be {engine} and drafter one of checkpoint, target, either, none")
        if method.name in found:
            raise SpecauditError(f"{path}: method {method.name} is declared twice")
        found[method.name] = method
    return found


def applies(methods: tuple[str, ...], method: str) -> bool:
    """Whether something declared for ``methods`` (a rule, a role, a bundle) applies to a launch of ``method``."""
    return "*" in methods or method in methods


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise SpecauditError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise SpecauditError(f"{path}: a methods file holds one mapping")
    return data


def _list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]

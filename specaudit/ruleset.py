"""Loading the declarative rules in ``rules/``: gate rules (``rules/<engine>/*.yaml``).

The format is documented in ``rules/README.md``. A rule names a *kind* (a shape of code that
specaudit knows how to find and judge, see gates.py), the files to look in, the kind's parameters,
the launch phase at which the engine would hit the gate, a hint, and its own code examples.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecauditError

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader where PyYAML has it

# The order in which a launch meets the gates: what fails first is reported first.
PHASES = ("arguments", "model_config", "speculative_config", "drafter_load", "model_runner", "candidate")


@dataclass(frozen=True)
class Rule:
    id: str
    engine: str
    kind: str
    phase: str
    title: str
    files: tuple[str, ...]  # globs relative to the tree root
    params: dict[str, Any]
    hint: str
    at: str | None = None  # the path's landmark where the gate bites, for a rule with no site on the path
    examples: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    source: str = field(default="", compare=False)

    @property
    def phase_order(self) -> int:
        return PHASES.index(self.phase)


def data_dir(name: str) -> Path:
    """A data directory (rules/, patches/): installed copies live in the package, a source checkout keeps
    them at the repository root."""
    here = Path(__file__).parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise SpecauditError(f"specaudit's {name}/ directory is missing from this installation")


def rules_dir() -> Path:
    return data_dir("rules")


def load_rules(engine: str, directory: Path | None = None) -> list[Rule]:
    from .gates import KINDS

    directory = directory or rules_dir() / engine
    rules = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)
        except yaml.YAMLError as exc:
            raise SpecauditError(f"{path}: invalid YAML ({exc})") from None
        rule = _rule_from(data, path)
        if rule.kind not in KINDS:
            raise SpecauditError(f"{path}: unknown kind {rule.kind!r} (known: {', '.join(sorted(KINDS))})")
        problem = KINDS[rule.kind].validate(rule)
        if problem:
            raise SpecauditError(f"{path}: {problem}")
        rules.append(rule)
    ids = [r.id for r in rules]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate:
        raise SpecauditError(f"{directory}: rule id {duplicate} is used twice")
    return rules


def rules_digest(rules: list[Rule]) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for rule in rules:
        digest.update(repr((rule.id, rule.kind, rule.files, sorted(rule.params.items()))).encode())
    return digest.hexdigest()


def _rule_from(data: Any, path: Path) -> Rule:
    if not isinstance(data, dict):
        raise SpecauditError(f"{path}: a rule file holds one mapping")
    missing = [k for k in ("id", "engine", "kind", "phase", "title", "files", "hint") if k not in data]
    if missing:
        raise SpecauditError(f"{path}: missing {', '.join(missing)}")
    if data["phase"] not in PHASES:
        raise SpecauditError(f"{path}: phase {data['phase']!r} is not one of {', '.join(PHASES)}")
    files = data["files"]
    return Rule(
        id=str(data["id"]),
        engine=str(data["engine"]),
        kind=str(data["kind"]),
        phase=str(data["phase"]),
        title=str(data["title"]),
        files=tuple(files if isinstance(files, list) else [files]),
        params=dict(data.get("params") or {}),
        hint=" ".join(str(data["hint"]).split()),
        at=str(data["at"]) if data.get("at") else None,
        examples=tuple(data.get("examples") or ()),
        source=str(path),
    )

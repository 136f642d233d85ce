"""Loading the declarative rules in ``rules/``: gate rules (``rules/<engine>/*.yaml``), and the release they were last
verified on (``rules/verified.yaml``).

The format is documented in ``rules/README.md``. A rule names a *kind* (a shape of code that
specaudit knows how to find and judge, see gates.py), the files to look in, the kind's parameters,
the launch phase at which the engine would hit the gate, a hint, and its own code examples.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

from ..core.data import YAML_LOADER, rules_dir
from ..core.errors import SpecauditError
from ..core.types import PHASES, Phase, Rule
from .gates import KINDS


def load_rules(engine: str, directory: Path | None = None) -> list[Rule]:
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
        digest.update(_rule_digest(rule))
    return digest.hexdigest()


def _rule_digest(rule: Rule) -> bytes:
    """A rule's own digest, once per rule object: a rule's repr (its params) is long, and the index asks for the
    digest of each file's rules, which share them."""
    found = _RULE_DIGESTS.get(id(rule))
    if found is None or found[0] is not rule:
        text = repr((rule.id, rule.kind, rule.files, sorted(rule.params.items())))
        found = _RULE_DIGESTS[id(rule)] = (rule, hashlib.blake2b(text.encode(), digest_size=8).digest())
    return found[1]


_RULE_DIGESTS: dict[int, tuple[Rule, bytes]] = {}  # id -> (the rule, kept so that its id stays its own, digest)


def _rule_from(data: Any, path: Path) -> Rule:
    if not isinstance(data, dict):
        raise SpecauditError(f"{path}: a rule file holds one mapping")
    missing = [k for k in ("id", "engine", "kind", "phase", "title", "methods", "files", "hint") if k not in data]
    if missing:
        raise SpecauditError(f"{path}: missing {', '.join(missing)}")
    if data["phase"] not in PHASES:
        raise SpecauditError(f"{path}: phase {data['phase']!r} is not one of {', '.join(PHASES)}")
    files = data["files"]
    return Rule(
        id=str(data["id"]),
        engine=str(data["engine"]),
        kind=str(data["kind"]),
        phase=Phase(data["phase"]),
        title=str(data["title"]),
        files=tuple(files if isinstance(files, list) else [files]),
        params=dict(data.get("params") or {}),
        hint=" ".join(str(data["hint"]).split()),
        at=str(data["at"]) if data.get("at") else None,
        methods=tuple(str(m).lower() for m in (data["methods"] if isinstance(data["methods"], list) else [data["methods"]])),
        examples=tuple(data.get("examples") or ()),
        source=str(path),
    )


@dataclass(frozen=True)
class Verified:
    """What an engine's code rules were last verified against (``rules/verified.yaml``): its newest release that the
    tests scan, and the rules with code of their shape in it."""

    release: str
    with_sites: frozenset[str]

    def unverified(self, version: str) -> bool:
        """Whether a release is newer than the one the rules were verified on (a version not known: not said; a local
        build of a release, ``0.34.0+cu130``, is that release)."""
        try:
            return Version(Version(version).public) > Version(self.release)
        except InvalidVersion:
            return False


def load_verified(engine: str) -> Verified | None:
    path = rules_dir() / "verified.yaml"
    if not path.exists():  # no engine recorded yet
        return None
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise SpecauditError(f"{path}: unreadable ({exc})") from None
    entry = data.get(engine) if isinstance(data, dict) else None
    if entry is None:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("with_sites"), list) or "release" not in entry:
        raise SpecauditError(f"{path}: {engine} needs a release and a with_sites list")
    return Verified(str(entry["release"]), frozenset(str(r) for r in entry["with_sites"]))

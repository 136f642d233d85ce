"""Stage 5: run the rules over the indexed tree and judge them against the launch: the scan result.

The result is plain data (result.py); every report format renders it and computes nothing.
"""

from __future__ import annotations

import re
import time

from .gates import KINDS, SITELESS_KINDS, Finding, Status
from .index import ClassInfo, TreeIndex, build_index
from .locate import EngineTree
from .registry import Registry, read_registry
from .resolve import Conformance, Protocol, Resolver
from .result import (ArchitectureRow, Landscape, LaunchSummary, RuleStatus, ScanResult, TreeSummary, Verdict)
from .ruleset import Rule, load_rules
from .target import Launch

EAGLE3_PROTOCOL = "SupportsEagle3"
_TOKEN_KEY = re.compile(r"(image|media|video|placeholder|img).*_(token_id|token_index)$")


class Judge:
    """What the kinds need to judge a site: the launch, the resolved tree, the registry, the protocols."""

    def __init__(self, launch: Launch, resolver: Resolver, registry: Registry | None, protocols: dict[str, Protocol]):
        self.launch = launch
        self.resolver = resolver
        self.registry = registry
        self.protocols = protocols
        self._target_class: ClassInfo | None | str = "unset"
        self._problem = ""

    def target_class(self) -> ClassInfo | None:
        if self._target_class == "unset":
            self._target_class = None
            architectures = self.launch.target.architectures
            entry = self.registry.lookup(architectures) if self.registry else None
            if entry is None:
                self._problem = f"no architecture of {architectures} is registered, so no model class is known"
            else:
                found = self.resolver.find_class(entry.module, entry.class_name)
                if isinstance(found, ClassInfo):
                    self._target_class = found
                else:
                    self._problem = f"{entry.architecture} -> {entry.module}.{entry.class_name}: {found.reason}"
        return self._target_class  # type: ignore[return-value]

    def target_class_problem(self) -> str:
        return self._problem

    def conformance(self, cls: ClassInfo, protocol: str) -> Conformance | None:
        found = self.protocols.get(protocol)
        return self.resolver.conformance(cls, found) if found else None

    def config_class_name(self, owner: str) -> str:
        if owner != "config":
            return f"{owner}"
        auto = (self.launch.target.config.get("auto_map") or {}).get("AutoConfig")
        return auto.rsplit(".", 1)[-1] if isinstance(auto, str) else "PretrainedConfig"

    def token_attributes(self) -> list[str]:
        return sorted(k for k in self.launch.target.config if _TOKEN_KEY.search(k))


def scan(tree: EngineTree, launch: Launch | None, rules: list[Rule] | None = None) -> ScanResult:
    started = time.perf_counter()
    rules = rules if rules is not None else load_rules(tree.engine.name)
    code_rules = [r for r in rules if r.kind not in SITELESS_KINDS]
    gate_rules = [r for r in code_rules if r.kind != "candidate"]
    index = build_index(tree, eager_modules=[tree.engine.interfaces_module, tree.engine.registry_module],
                        rules=code_rules)
    resolver = Resolver(index)
    registry = read_registry(resolver)
    protocols = resolver.protocols(tree.engine.interfaces_module)
    sites = {rule.id: sorted(index.sites[rule.id], key=lambda s: (s.file, s.line)) for rule in code_rules}

    findings: list[Finding] = []
    candidates: list[Finding] = []
    if launch is not None and launch.target is not None:
        judge = Judge(launch, resolver, registry, protocols)
        for rule in gate_rules:
            findings += [KINDS[rule.kind].judge(rule, site, judge) for site in sites[rule.id]]
        for rule in rules:
            if rule.kind in SITELESS_KINDS:
                finding = KINDS[rule.kind].judge(rule, None, judge)
                findings += [finding] if finding else []
        findings.sort(key=lambda f: (_phase(rules, f.rule_id), f.file, f.line))
    claimed = {(s.file, line) for rule in gate_rules for s in sites[rule.id] for line in range(s.line, s.end_line + 1)}
    for rule in code_rules:
        if rule.kind == "candidate":
            candidates += [KINDS[rule.kind].judge(rule, site, None) for site in sites[rule.id]
                           if (site.file, site.line) not in claimed]

    landscape = index.memo("landscape", lambda: _landscape(index, resolver, registry, protocols))
    index.save()
    return ScanResult(
        tree=TreeSummary(tree.engine.name, tree.version, str(tree.root), tree.origin),
        launch=LaunchSummary.of(launch) if launch else None,
        verdict=_verdict(findings, launch),
        findings=findings,
        candidates=candidates,
        rules=[RuleStatus(r.id, r.title, r.kind, r.phase, len(sites[r.id])) for r in code_rules],
        landscape=landscape,
        skipped=dict(sorted(index.skipped.items())),
        files_indexed=len(index.modules),
        seconds=round(time.perf_counter() - started, 3),
    )


def _phase(rules: list[Rule], rule_id: str) -> int:
    return next(r.phase_order for r in rules if r.id == rule_id)


def _verdict(findings: list[Finding], launch: Launch | None) -> str:
    if launch is None or launch.target is None:
        return Verdict.LANDSCAPE
    statuses = {f.status for f in findings}
    if Status.BLOCKS in statuses:
        return Verdict.BLOCKED
    if Status.UNKNOWN in statuses:
        return Verdict.UNKNOWN
    return Verdict.READY


def _landscape(index: TreeIndex, resolver: Resolver, registry: Registry | None,
               protocols: dict[str, Protocol]) -> Landscape:
    eagle3 = protocols.get(EAGLE3_PROTOCOL)
    rows: list[ArchitectureRow] = []
    for arch, entry in sorted((registry.entries if registry else {}).items()):
        found = resolver.find_class(entry.module, entry.class_name)
        if not isinstance(found, ClassInfo):
            rows.append(ArchitectureRow(arch, entry.module, entry.class_name, entry.declared_in, None, None,
                                        {}, found.reason))
            continue
        module = index.module(found.module)
        interfaces = {name: resolver.conformance(found, p).conforms for name, p in protocols.items()}
        reason = resolver.conformance(found, eagle3).reason if eagle3 else "no SupportsEagle3 in this release"
        rows.append(ArchitectureRow(arch, found.module, found.name, entry.declared_in, module.path if module else None,
                                    found.line, interfaces, reason))
    conforming, unknown, grep_classes = [], [], []
    protocol_classes = {p.cls.qualname for p in protocols.values()}
    for module in list(index.modules.values()):
        for cls in module.classes.values():
            if cls.qualname in protocol_classes:
                continue
            if any(EAGLE3_PROTOCOL in base for base in cls.base_sources):
                grep_classes.append(cls.qualname)
            if eagle3 is None:
                continue
            verdict = resolver.conformance(cls, eagle3).conforms
            if verdict:
                conforming.append(cls.qualname)
            elif verdict is None:
                unknown.append(cls.qualname)
    return Landscape(
        protocols={name: list(p.members) for name, p in sorted(protocols.items())},
        eagle3_members=list(eagle3.members) if eagle3 else [],
        architectures=rows,
        eagle3_classes=sorted(conforming),
        eagle3_unknown=sorted(unknown),
        grep_classes=sorted(grep_classes),
    )

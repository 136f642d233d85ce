"""The scan result: plain typed data that flows to every report format (a live launch's: outcome.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.types import PHASES, ExitCode, Finding, Status, Verdict, worst
from ..launch.request import Launch


@dataclass(frozen=True)
class TreeSummary:
    engine: str
    version: str
    root: str
    origin: str
    platform: str = "cuda"
    # The platform dispatches that decided what the verdict read: "file:line branch" (the target's modules, the
    # traced path's; every registered module's for the landscape).
    platform_branches: tuple[str, ...] = ()


@dataclass(frozen=True)
class Provenance:
    """Where a report comes from: enough to reproduce it, and to know what the engine tree had in it."""

    specaudit: str  # its version
    command: str  # the command line that made the report
    time: str  # UTC, ISO 8601
    source: str  # where the engine release came from
    bundles: tuple[str, ...] = ()  # specaudit patch bundles applied to the tree
    modified: tuple[str, ...] = ()  # files the scan read that differ from the wheel's RECORD
    in_memory: tuple[str, ...] = ()  # files read with edits in memory (a bundle planned, not applied)
    patching: bool = False  # a patch of the tree was under way (its journal open): what was read may be half written


@dataclass(frozen=True)
class LaunchSummary:
    target: str
    source: str
    architectures: list[str]
    model_type: str
    text_model_type: str
    method: str | None  # as the release resolves it (as named, where it could not be told)
    draft: str | None
    notes: tuple[str, ...] = ()  # about where the target's config came from (a preset the Hub cache disagrees with)

    @classmethod
    def of(cls, launch: Launch) -> LaunchSummary | None:
        t = launch.target
        if t is None:
            return None
        return cls(t.name, t.source, t.architectures, t.model_type, t.text_model_type, launch.method, launch.draft,
                   t.notes)


@dataclass(frozen=True)
class MethodSummary:
    """The launch's speculative method: as the launch names it, as the release's own code resolves it, and whether
    specaudit models it (a method it does not model gets no verdict)."""

    requested: str | None  # None: the launch names none, and the engine infers it
    method: str | None  # the method the engine runs; None: it cannot be told before launch
    modeled: bool
    how: tuple[str, ...]  # the engine's own steps that resolved it, "file:line: code (where ...)"
    release_methods: tuple[str, ...]  # the methods the release has
    listed_at: str  # where the release lists them
    draft: str = ""  # the draft the engine builds from the draft's (or the target's own) config, where it rewrites it
    warnings: tuple[str, ...] = ()  # what the engine logs as a warning while resolving it, "file:line: message"


@dataclass(frozen=True)
class KnownRisk:
    """A known runtime failure whose cell the launch is in (rules/signatures/known-<engine>.yaml): the release,
    the launch's features and its method match a crash a public thread reports."""

    id: str
    title: str
    hint: str  # the fix or workaround, where it was seen, and the thread


@dataclass(frozen=True)
class GateSite:
    """Where a gate stands in the tree, whatever the launch: a rule's site or an obligation of the traced path.
    A crash whose frame falls inside ``line..end_line`` of ``file`` is that gate (explain/diagnose.py)."""

    rule_id: str
    title: str
    file: str
    line: int
    end_line: int

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class RuleStatus:
    id: str
    title: str
    kind: str
    phase: str
    sites: int  # 0: the gate is not in this release (or changed shape)


@dataclass(frozen=True)
class PathEntry:
    role: str
    function: str | None  # None: not found in this tree
    file: str | None
    line: int | None
    problem: str


@dataclass(frozen=True)
class PathSummary:
    """How the method's path was traced: the runner, the entry points, and what was decided on it."""

    runner: str | None
    runner_reason: str
    entries: list[PathEntry]
    functions: int  # functions followed
    obligations: int  # raises, asserts and reads of the target met on the way
    decided: dict[str, int]  # status -> obligations, for the launch's target



@dataclass(frozen=True)
class ArchitectureRow:
    architecture: str
    module: str
    class_name: str
    declared_in: str
    file: str | None
    line: int | None
    interfaces: dict[str, bool | None]  # every protocol of the engine -> conforms (None: unknown)
    conforms: bool | None  # satisfies the method's target contract (None: unknown)
    reason: str


@dataclass(frozen=True)
class Landscape:
    """The registered architectures and classes that can serve as targets of one method, by its contract."""

    method: str
    protocols: dict[str, list[str]]  # every Protocol of the interfaces module -> its members
    contract: str  # what a target class must have for the method: SupportsEagle3, or the methods its path calls
    contract_members: list[str]
    grep_pattern: str  # what a grep for the contract looks for
    architectures: list[ArchitectureRow]
    conforming_classes: list[str]  # every indexed class that satisfies the contract
    unknown_classes: list[str]
    grep_classes: list[str]  # classes a grep for grep_pattern finds


@dataclass
class ScanResult:
    tree: TreeSummary
    launch: LaunchSummary | None
    verdict: Verdict
    findings: list[Finding]
    candidates: list[Finding]
    rules: list[RuleStatus]
    path: PathSummary
    landscape: Landscape
    skipped: dict[str, str]
    files_indexed: int
    seconds: float
    gates: list[GateSite] = field(default_factory=list)  # every gate site on the path, decided or not
    provenance: Provenance | None = None
    method: MethodSummary | None = None  # None for a landscape scan
    known_failures: list[KnownRisk] = field(default_factory=list)  # the known crashes of the launch's cell

    @property
    def exit_code(self) -> ExitCode:
        return self.verdict.exit_code

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.status == Status.BLOCKS]

    @property
    def degrading(self) -> list[Finding]:
        """What makes the launch run without the drafter helping (the findings that degrade)."""
        return [f for f in self.findings if f.status == Status.DEGRADES]

    @property
    def warnings(self) -> list[Finding]:
        """What the drafter loses on some requests, with its figure: the launch runs and the drafter helps, less."""
        return [f for f in self.findings if f.status == Status.WARNS]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        return data


@dataclass
class Comparison:
    """Several engine releases audited for the same launch: one report, a column per release."""

    results: list[ScanResult]

    @property
    def exit_code(self) -> ExitCode:
        return worst({r.exit_code for r in self.results})

    @property
    def columns(self) -> list[str]:
        return [f"{r.tree.engine} {r.tree.version}" for r in self.results]

    def rows(self) -> list[tuple[str, list[list[Finding]]]]:
        """Per launch phase, each release's findings in it (gates met in that phase, in order)."""
        return [(phase, [[f for f in r.findings if f.phase == phase] for r in self.results])
                for phase in PHASES if any(f.phase == phase for r in self.results for f in r.findings)]

    def to_dict(self) -> dict[str, Any]:
        return {"results": [r.to_dict() for r in self.results], "exit_code": self.exit_code}

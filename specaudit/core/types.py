"""The types every stage shares, as Fixit's ftypes.py: what a rule is, where it matched, how a gate is judged, and
the statuses, verdicts and exit codes. A leaf: it imports nothing of specaudit's, so any stage may import it and
no import cycle can pass through it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any


class _Word(str, Enum):
    """An enum whose members are their strings: they compare, format, sort and serialize as the word itself."""

    def __str__(self) -> str:
        return str(self.value)

    __hash__ = str.__hash__  # Enum hashes the member's name: a dict keyed by members must find the word too


class ExitCode(IntEnum):
    READY = 0
    BLOCKED = 1
    BAD_INPUT = 2
    UNKNOWN = 3
    DRIFT = 4  # a file is not as the patch bundle expects
    OUT_OF_RANGE = 5  # no bundle covers the release
    LOCKED = 6  # another patch run holds the tree
    SSH = 7  # the remote cannot be reached, refuses the key, or its host key changed
    FLAGGED = 8  # smoke: the launch runs, and the drafter silently does not help (or is not lossless)
    DEGRADED = 8  # scan: the launch will run, and the drafter will not help (the same code as smoke's FLAGGED)
    INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


class Status(_Word):
    """What a gate does to one launch."""

    BLOCKS = "blocks"
    PASSES = "passes"
    UNKNOWN = "unknown"
    NOT_APPLICABLE = "not applicable"
    UNCLASSIFIED = "unclassified"
    UNDECIDED = "undecided"  # depends on what cannot be known before launch; not part of the verdict
    DEGRADES = "degrades"  # the launch runs, and the drafter cannot help any request: acceptance near zero
    WARNS = "warns"  # the launch runs and the drafter helps, less than it could (a figure says how much): not a verdict


class Verdict(_Word):
    """A scan's answer for a launch."""

    READY = "READY"
    BLOCKED = "BLOCKED"
    UNKNOWN = "UNKNOWN"
    DEGRADED = "DEGRADED"  # it will run, and the drafter will help no request: a finding that degrades, none that blocks
    LANDSCAPE = "LANDSCAPE"  # no target: the engine's EAGLE-3 landscape only

    @property
    def exit_code(self) -> ExitCode:
        return {Verdict.BLOCKED: ExitCode.BLOCKED, Verdict.UNKNOWN: ExitCode.UNKNOWN,
                Verdict.DEGRADED: ExitCode.DEGRADED}.get(self, ExitCode.READY)


# The worst first: what a report of several verdicts (releases side by side, a matrix) exits with. A launch known
# not to help outranks one whose gates could not all be decided: its fix is owed whatever they turn out to be.
WORST_FIRST: tuple[ExitCode, ...] = (ExitCode.BLOCKED, ExitCode.DEGRADED, ExitCode.UNKNOWN)


def worst(codes: Collection[ExitCode]) -> ExitCode:
    """The exit code of several verdicts: the worst of them (WORST_FIRST), else READY."""
    return next((code for code in WORST_FIRST if code in codes), ExitCode.READY)


class SmokeVerdict(_Word):
    """A live launch's answer."""

    PASSED = "PASSED"  # healthy, the answers are right, the drafter accepts what its method should
    FLAGGED = "FLAGGED"  # it runs, and something is silently wrong: low acceptance, or not lossless
    FAILED = "FAILED"  # the launch crashed, never became ready, or answered wrong
    BLOCKED = "BLOCKED"  # the preflight scan says it cannot work; nothing was launched
    UNREACHABLE = "UNREACHABLE"  # the node cannot be reached, refuses us, or was lost and not regained
    INTERRUPTED = "INTERRUPTED"  # Ctrl-C

    @property
    def exit_code(self) -> ExitCode:
        return {SmokeVerdict.PASSED: ExitCode.READY, SmokeVerdict.FLAGGED: ExitCode.FLAGGED,
                SmokeVerdict.FAILED: ExitCode.BLOCKED, SmokeVerdict.BLOCKED: ExitCode.BLOCKED,
                SmokeVerdict.UNREACHABLE: ExitCode.SSH, SmokeVerdict.INTERRUPTED: ExitCode.INTERRUPTED}[self]


class Phase(_Word):
    """The order in which a launch meets the gates: what fails first is reported first."""

    ARGUMENTS = "arguments"
    MODEL_CONFIG = "model_config"
    SPECULATIVE_CONFIG = "speculative_config"
    DRAFTER_LOAD = "drafter_load"
    MODEL_RUNNER = "model_runner"
    CANDIDATE = "candidate"


PHASES: tuple[Phase, ...] = tuple(Phase)


@dataclass(frozen=True)
class Rule:
    """A gate rule, as a file in ``rules/<engine>/`` declares it (format: rules/README.md)."""

    id: str
    engine: str
    kind: str
    phase: Phase
    title: str
    files: tuple[str, ...]  # globs relative to the tree root
    params: dict[str, Any]
    hint: str
    at: str | None = None  # the path's landmark where the gate bites, for a rule with no site on the path
    methods: tuple[str, ...] = ("*",)  # the speculative methods whose launches meet the gate ("*": every method)
    examples: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    source: str = field(default="", compare=False)


@dataclass(frozen=True)
class Site:
    """One place in the engine where a rule's shape matched; ``details``: what the kind's shape read there, as the
    kind's own ``Details`` dataclass (scan/gates.py)."""

    rule_id: str
    file: str
    line: int
    end_line: int
    code: str
    exception: str | None  # the exception type the engine raises there
    message: str | None  # its message, with {expression} where the engine formats a value in
    details: Any = field(default=None, hash=False)


@dataclass(frozen=True)
class Finding:
    """A site judged against a launch."""

    rule_id: str
    title: str
    phase: Phase
    status: Status
    file: str
    line: int
    code: str
    error: str | None  # the error text the engine would print, as far as it can be rendered
    why: str
    hint: str
    also: tuple[str, ...] = ()  # other places where the engine meets the same gate with the same outcome
    step: int = 0  # where the traced path meets it (0: not on the traced path); orders gates within a phase

    @property
    def location(self) -> str:
        """file:line in the engine, or the checkpoint file a finding about a drafter comes from."""
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class EngineFunction:
    """A function of the release as a check reads it: where it is, and its syntax tree (an ``ast.FunctionDef``)."""

    file: str
    line: int
    name: str
    node: Any = field(compare=False, hash=False)
    on_path: bool = False  # the launch's traced path follows it, or calls it from a function it follows

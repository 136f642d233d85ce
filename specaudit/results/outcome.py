"""What a live launch or its log showed: the lines that matched a crash signature, the root cause and whether the scan
predicted it (explain), and a smoke launch's result. Plain typed data, as result.py is for a scan.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.types import ExitCode, SmokeVerdict
from ..launch.parallel import Arithmetic
from .scan import GateSite, Provenance, ScanResult


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str


@dataclass(frozen=True)
class Crash:
    """One traceback: where it starts in the log, which process printed it, and what it raised."""

    line_number: int
    process: str  # "(Worker pid=7271)", or "" for an unprefixed one
    exception: str
    message: str
    frames: tuple[Frame, ...]
    continued: tuple[str, ...] = ()  # the lines its message went on over, where a paste wrapped it

    @property
    def text(self) -> str:
        return f"{self.exception}: {self.message}" if self.message else self.exception


@dataclass(frozen=True)
class Acceptance:
    """The speculative-decoding figures of specaudit's own requests."""

    drafts: float | None  # drafts proposed (None: the engine exposes no such counter)
    draft_tokens: float | None
    accepted_tokens: float | None
    acceptance_rate: float | None  # accepted / drafted tokens
    mean_acceptance_length: float | None  # tokens per verification step: 1 + accepted / drafts
    per_position: list[float]  # acceptance at draft position 0, 1, ...
    floors: dict[str, float]  # the method's floors these were held against
    flags: list[str]  # why the figures mean a silent failure; empty when they do not
    source: str = ""  # where the figures come from: counters over the requests, each request's meta_info, or gauges
    expected: str = ""  # what the acceptance length was held against: the drafter's published twin, or its method's range
    by_kind: dict[str, float] = field(default_factory=dict)  # mean acceptance length per prompt kind (chat, code, maths)


@dataclass(frozen=True)
class SignatureMatch:
    signature: str
    title: str
    engine: str
    line_number: int  # 1-based, in the log
    line: str  # without ANSI colours
    fields: dict[str, str]  # the pattern's named groups that matched
    gate: str | None
    gates: tuple[str, ...]  # every rule whose gate may raise it: `gate`, or the signature's `gates`
    hint: str
    root: bool
    context: tuple[str, ...]  # the lines around it


@dataclass(frozen=True)
class RaiseSite:
    """Where the engine makes a message (its raise, assert or logger call), as the message atlas has it."""

    engine: str
    file: str  # the package path: vllm/config/speculative.py
    function: str
    line: int  # in the newest of the releases the paste is consistent with
    kind: str  # "raise", "assert", "logger.warning"
    exception: str
    guard: str  # the condition it is made under, as source text ("" where unconditional)
    releases: str  # the releases that have it, as runs of the atlas's: "0.17.0-0.33.0"
    message: str = ""  # the message as the site makes it, each hole as {its source}: "got {n} drafts"

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Located:
    """A pasted line found in the message atlas: where the engine raises it, which engine and releases it is
    consistent with (the sites' and the frames'), the values in its holes, and the fixes its guard names."""

    text: str  # the line as looked up
    sites: tuple[RaiseSite, ...]  # the best matching sites, most likely first
    engine: str | None  # None: both engines make this message
    releases: str  # the releases the paste is consistent with, as runs ("vllm 0.17.0-0.33.0")
    holes: tuple[tuple[str, str], ...]  # (the expression printed, its text) at the first site
    fixes: tuple[str, ...]  # "--speculative-config key "num_speculative_tokens": at most n_predict (n_predict is 3)"
    quoted_by: RaiseSite | None = None  # the wrapper whose message quotes this one, where that was the line read
    quotes: str = ""  # what the line (a wrapper's) quotes, where the atlas knows no template of it: the failure


@dataclass(frozen=True)
class Explanation:
    log: str
    lines: int
    cause: SignatureMatch | None  # the first root-cause match
    matches: list[SignatureMatch]
    crash: Crash | None = None  # the root cause read from the tracebacks, signature or not
    release: dict[str, str] = field(default_factory=dict)  # what the log names: engine, version, platform
    # Filled by diagnose.explain: the root cause classified against the scan of the release, that scan, and where
    # the report comes from (the scan's provenance: this command made it; else this command's alone).
    root: RootCause | None = None
    scanned: str | None = None  # "vllm 0.32.0 (platform cpu)", or why no scan was used
    provenance: Provenance | None = None
    located: Located | None = None  # the root line found in the message atlas (diagnose.explain)

    @property
    def exit_code(self) -> ExitCode:
        """1 when the log shows a failed launch or a crash after it came up (a known signature, or a traceback),
        0 only when it shows neither."""
        return ExitCode.BLOCKED if self.cause or self.crash or self.root else ExitCode.READY

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exit_code": self.exit_code}


@dataclass(frozen=True)
class RootCause:
    """Why a launch failed, as its log shows it."""

    summary: str  # one line: what failed, and where
    by: str  # how it was classified: "gate location", "signature", "raise site", "traceback" or "exit status"
    crash: Crash | None  # the root traceback
    signature: SignatureMatch | None  # the root line that matched a known signature
    gate: GateSite | None  # the scan's gate it is, when one
    frame: Frame | None  # the engine frame it was raised in
    located: Located | None = None  # where the message atlas finds it: the raise sites, releases and fixes


@dataclass(frozen=True)
class Agreement:
    """The scan's prediction against what the launch did."""

    predicted: str  # the verdict, and the first blocking gate
    outcome: str  # came up, or the root cause
    agrees: bool | None  # None: nothing to compare (no scan, an UNKNOWN verdict, a launch stopped by its host)
    why: str
    bug_report: str = ""  # for a disagreement: what specaudit got wrong, with the frames

    @property
    def line(self) -> str:
        word = {True: "agree", False: "DISAGREE", None: "not compared"}[self.agrees]
        return f"prediction and outcome {word}: {self.why}"


# -- smoke -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One step of the timeline: a phase begun, a milestone line seen, a check done."""

    seconds: float  # since the smoke began
    phase: str
    text: str


@dataclass(frozen=True)
class Preflight:
    hostname: str
    python: str  # executable and version
    engine: str  # "vllm 0.32.0"
    engine_root: str
    modified_files: list[str]  # engine .py files that differ from the wheel's RECORD
    gpus: list[dict[str, str]]  # index, name, memory used/total/free (MiB); empty without nvidia-smi
    gpu_processes: list[dict[str, str]]
    nvidia_smi: bool
    port: int
    port_in_use: bool
    leftovers: list[dict[str, Any]]  # earlier launches still running: run dir, process group, command
    problems: list[str]  # what stops the launch before it starts
    models: list[str] = field(default_factory=list)  # where the node loads the target and drafter from


@dataclass(frozen=True)
class Answer:
    prompt: str
    ok: bool
    text: str
    token_ids: list[int] | None
    completion_tokens: int | None
    problem: str  # why the answer is wrong; empty when ok


@dataclass(frozen=True)
class Lossless:
    identical: bool
    compared: int  # prompts compared
    differences: list[str]  # the first diverging token of each prompt that differs


@dataclass(frozen=True)
class SmokeNode:
    """One node of a multi-node smoke launch: its part of the launch and what its own log showed."""

    host: str
    role: str  # "node rank 0: the head (API server)", "node rank 1 --headless", "Ray worker (...)"
    commands: list[list[str]]  # what it ran, in order (its engine's part; a Ray node's `ray start` first)
    preflight: Preflight | None
    scan: str  # its own engine's scan in a line ("READY", "BLOCKED: rule-id"), or why it was not scanned
    verdict: str  # its fleet-audit verdict: READY, BLOCKED, DEGRADED, UNKNOWN or UNREACHABLE
    process_groups: list[int]  # one per launch on the node (a lossless check relaunches)
    exit_status: int | None  # its engine's, when it exited on its own
    failed: bool  # its log shows a crash, or its engine exited
    root: RootCause | None  # its own log's root cause, when it failed
    last_lines: list[str]
    logs: list[str]  # local copies of its logs


@dataclass
class SmokeResult:
    host: str
    command: list[str]
    engine: str
    target: str | None  # the model the command launches
    started: str  # local time, ISO 8601
    verdict: SmokeVerdict
    reason: str  # one line: why this verdict
    preflight: Preflight | None
    scan: ScanResult | None
    timeline: list[Event]
    cause: SignatureMatch | None  # the first fatal line of the log
    root: RootCause | None  # why the launch failed, classified by gate location, signature or traceback
    agreement: Agreement | None  # the preflight scan's prediction against the launch (None: nothing launched)
    engine_exit: int | None  # the engine's exit status, when it exited on its own
    last_lines: list[str]
    answers: list[Answer]
    acceptance: Acceptance | None  # None: the requests were not reached
    lossless: Lossless | None
    teardown: list[str]  # what teardown did and found
    logs: list[str]  # local copies of the remote logs, one per launch
    seconds: float
    provenance: Provenance | None = None  # the preflight scan's (this command made it); else this command's alone
    # A launch across several nodes (fleet/smoke.py): each node's part, the node whose log holds the root cause, the
    # launch arithmetic against the nodes, and where the nodes differ in what must agree (one line each).
    nodes: list[SmokeNode] = field(default_factory=list)
    root_node: str = ""
    arithmetic: Arithmetic | None = None
    differences: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        return self.verdict.exit_code

    @property
    def command_line(self) -> str:
        """The launch command as one shell line: copy-pasteable, quotes and all."""
        return shlex.join(self.command)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        if not self.nodes:  # a launch on one node: its report as before the multi-node smoke
            for key in ("nodes", "root_node", "arithmetic", "differences"):
                del data[key]
        return data

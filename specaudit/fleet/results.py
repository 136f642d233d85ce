"""What a fleet audit found, as plain typed results the report package renders: each node's (its engine, patch
bundles, checkpoints, devices, scan), where the nodes differ, and the launch arithmetic held against them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.types import ExitCode, Finding, Status, Verdict
from ..launch.parallel import Arithmetic
from ..results.outcome import Event, Preflight
from ..results.scan import Provenance, ScanResult

UNREACHABLE = "UNREACHABLE"
# Worst first: a node not reached tells nothing; then as a scan's verdicts rank (core.types.WORST_FIRST): a blocked
# node will not run, a degraded one runs and its drafter does not help, an unknown one may not run.
ORDER: tuple[str, ...] = (UNREACHABLE, Verdict.BLOCKED, Verdict.DEGRADED, Verdict.UNKNOWN, Verdict.READY)


def worst_verdict(verdicts: set[str]) -> str:
    return next((str(v) for v in ORDER if v in verdicts), str(Verdict.READY))


def exit_code(verdict: str) -> ExitCode:
    """A node's or the fleet's verdict as scan's exit codes, and SSH's for a node not reached."""
    return ExitCode.SSH if verdict == UNREACHABLE else Verdict(verdict).exit_code


@dataclass(frozen=True)
class CheckpointDigest:
    """A checkpoint the launch names, as the node has it: digests of its config.json and of its safetensors headers
    (each file's name, size, header and small index tensors): two nodes with equal digests load the same shapes."""

    role: str  # "target" or "drafter"
    path: str
    present: bool
    where: str  # where the node loads it from (a directory, its Hub cache, a download at launch)
    config_sha256: str | None
    headers_sha256: str | None  # None: no safetensors file there
    files: int  # safetensors files (and index) read


@dataclass(frozen=True)
class BundleState:
    """A specaudit patch bundle the node's patch state says is applied to its engine."""

    bundle: str
    files: list[str]
    state: str  # "applied" (every file as the bundle left it), "drifted", or "interrupted"
    detail: str


@dataclass(frozen=True)
class Dependency:
    """A library the launch runs on, as the node has it, against what the release requires of it."""

    name: str  # normalized distribution name
    installed: str | None  # None: not installed beside the engine
    required: list[str]  # "vllm: transformers<5,>=4.56.0", the requirements whose markers hold on the node
    met: bool | None  # the installed version meets every one of them (None: none requires it)

    @property
    def line(self) -> str:
        """What a node has of it, as where the nodes differ shows it."""
        met = "" if self.met is None else "" if self.met else f" (NOT as {'; '.join(self.required)})"
        return (self.installed or "not installed") + met


@dataclass
class NodeAudit:
    host: str
    transport: str  # "ssh" or "kubectl"
    error: str  # why the node could not be reached ("": it was)
    probe_problem: str = ""  # reached, and not probed: no such command there, an answer that is not the probe's
    preflight: Preflight | None = None
    engine_digest: str | None = None  # sha256 over the engine's .py files and release
    bundles: list[BundleState] = field(default_factory=list)
    patch_problem: str = ""  # the node's patch state could not be read
    checkpoints: list[CheckpointDigest] = field(default_factory=list)
    dependencies: list[Dependency] = field(default_factory=list)
    platform: str = ""  # the branch its scan read: cuda where nvidia-smi lists a GPU, else cpu
    scan: ScanResult | None = None
    scanned_on: str = ""  # the node whose scan stands for this one (same engine files, checkpoints, platform)
    scan_problem: str = ""
    seconds: float = 0.0
    timeline: list[Event] = field(default_factory=list)

    @property
    def reached(self) -> bool:
        return not self.error

    @property
    def gpus(self) -> int | None:
        """GPUs nvidia-smi lists (0 on a node without nvidia-smi: a CPU node); None when not reached."""
        return len(self.preflight.gpus) if self.preflight is not None else None

    @property
    def problems(self) -> list[str]:
        """What stops the launch on this node before its scan is read: why it could not be probed, or what its
        preflight found (the port taken, leftovers, a checkpoint missing)."""
        return [self.probe_problem] if self.probe_problem else list(self.preflight.problems) if self.preflight else []

    @property
    def verdict(self) -> str:
        if not self.reached:
            return UNREACHABLE
        if self.problems:
            return Verdict.BLOCKED
        if self.scan is None:
            return Verdict.UNKNOWN
        return self.scan.verdict if self.scan.verdict != Verdict.LANDSCAPE else Verdict.READY

    @property
    def exit_code(self) -> ExitCode:
        return exit_code(self.verdict)

    def summary_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "scan"}
        scan = self.scan
        data.update(verdict=self.verdict, gpus=self.gpus, exit_code=self.exit_code, scan=None if scan is None else {
            "verdict": scan.verdict, "release": f"{scan.tree.engine} {scan.tree.version}", "origin": scan.tree.origin,
            "blocking": [{"rule_id": f.rule_id, "title": f.title, "location": f.location} for f in scan.blocking]})
        return data


@dataclass(frozen=True)
class Difference:
    """One thing the nodes do not agree on: each value, and the nodes that have it."""

    aspect: str
    values: dict[str, list[str]]  # value -> hosts
    material: bool  # a multi-node launch needs it the same on every node (else it is shown, not held against it)

    @property
    def odd(self) -> list[str]:
        """The nodes outside the largest group (the head's group on a tie)."""
        groups = sorted(self.values.values(), key=len, reverse=True)
        return [h for group in groups[1:] for h in group]


@dataclass(frozen=True)
class ParallelGate:
    """A gate of a node's own engine whose code reads the parallel sizes, as that node's scan decided it."""

    hosts: list[str]
    finding: Finding


@dataclass
class FleetResult:
    command: list[str]
    engine: str
    target: str | None
    hosts: list[str]
    started: str
    nodes: list[NodeAudit]
    differences: list[Difference]
    arithmetic: Arithmetic | None
    parallel_gates: list[ParallelGate]
    scans: int  # scans made (nodes with the same engine files, checkpoints and platform share one)
    seconds: float
    provenance: Provenance | None = None

    @property
    def consistent(self) -> bool:
        return not any(d.material for d in self.differences)

    @property
    def unmet(self) -> dict[str, list[str]]:
        """Each dependency that a node has otherwise than the release requires, and those nodes."""
        found: dict[str, list[str]] = {}
        for node in self.nodes:
            for dependency in node.dependencies:
                if dependency.met is False:
                    found.setdefault(dependency.name, []).append(node.host)
        return found

    @property
    def worst_node(self) -> str:
        return worst_verdict({n.verdict for n in self.nodes})

    @property
    def verdict(self) -> str:
        """The worst of the nodes' verdicts and the fleet's own: BLOCKED where the nodes differ in what the launch
        needs alike or its arithmetic does not add up, UNKNOWN where that cannot be told (no nvidia-smi)."""
        arithmetic = self.arithmetic.status if self.arithmetic is not None else None
        own = Verdict.BLOCKED if not self.consistent or arithmetic == Status.BLOCKS else \
            Verdict.UNKNOWN if arithmetic == Status.UNKNOWN else Verdict.READY
        return worst_verdict({self.worst_node, own})

    @property
    def exit_code(self) -> ExitCode:
        return exit_code(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command, "engine": self.engine, "target": self.target, "hosts": self.hosts,
            "started": self.started, "verdict": self.verdict, "worst_node": self.worst_node,
            "consistent": self.consistent, "unmet_dependencies": self.unmet, "exit_code": self.exit_code,
            "seconds": self.seconds, "scans": self.scans,
            "nodes": [n.summary_dict() for n in self.nodes],
            "differences": [{**asdict(d), "odd": d.odd} for d in self.differences],
            "arithmetic": self.arithmetic.to_dict() if self.arithmetic is not None else None,
            "parallel_gates": [asdict(g) for g in self.parallel_gates],
            # Each scan once, under the node it was made on.
            "node_scans": {n.host: n.scan.to_dict() for n in self.nodes if n.scan is not None and not n.scanned_on},
            "provenance": asdict(self.provenance) if self.provenance is not None else None,
        }

"""``specaudit smoke HEAD WORKER...``: a smoke launch across several nodes, through the engine's own multi-node
launcher, never one of specaudit's: vLLM's multiprocessing multi-node mode (every node runs the command, with its
``--node-rank``, the workers ``--headless``), SGLang's (``--nnodes/--node-rank/--dist-init-addr``), or a Ray cluster
(``ray start --head`` and ``ray start --address`` on the others, the command on the head). Each node's part is what
the launch arithmetic (launch/parallel.py) derives from the head's command.

It is the smoke (smoke/run.py) with two stages of its own: the preflight is the fleet audit of every node over the
smoke's own connections (audit.py: probe, scans, where the nodes differ, the arithmetic), and the launch starts each
node's part detached with its own watchdog (smoke/launcher.py). The smoke's watch streams and polls every node's part
as one (smoke/watch.py), the root cause read across their logs; the exercise goes through the head; teardown stops
every node's part on every way out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.errors import SpecauditError
from ..core.types import SmokeVerdict, Verdict
from ..launch.command import strip_assignments
from ..launch.parallel import Parallelism, parallelism
from ..results.outcome import Acceptance, Answer, Lossless, SmokeNode, SmokeResult
from ..smoke.launcher import Run
from ..smoke.remote import SSHError
from ..smoke.run import Smoke
from ..smoke.session import SmokeOptions, SmokeView, Stop
from ..smoke.watch import Part, Watch
from .audit import FleetOptions, audit_nodes
from .node import Node
from .results import FleetResult, NodeAudit

RAY_PORT = 6379  # ray start --head's default GCS port


@dataclass(frozen=True)
class NodePart:
    """What one node runs in the launch, in order."""

    host: str
    rank: int
    role: str
    commands: list[list[str]]


def node_parts(layout: Parallelism, argv: list[str], hosts: list[str]) -> list[NodePart]:
    """Each node's part of the launch in the engine's own multi-node mode, the head's first: with Ray, ``ray start`` on
    every node (kept in the foreground, ``--block``, so that it stays in the part's process group) and the command on
    the head; else the command on each of the ``--nnodes`` nodes with its rank (parallel.Parallelism.node_command)."""
    if not layout.multinode:
        raise SpecauditError(f"{len(hosts)} nodes named, and the command asks for one (no --nnodes, no Ray executor): "
                             "give the engine's multi-node options, or smoke each node on its own")
    roles = _roles(layout, hosts)
    if layout.ray:
        ray = _ray_program(argv)
        head = f"{layout.master or hosts[0]}:{RAY_PORT}"
        return [NodePart(hosts[0], 0, roles[hosts[0]], [ray + ["start", "--head", f"--port={RAY_PORT}", "--block"],
                                                         list(argv)])] + \
            [NodePart(h, i, roles[h], [ray + ["start", f"--address={head}", "--block"]])
             for i, h in enumerate(hosts[1:], 1)]
    return [NodePart(h, i, roles[h], [layout.node_command(list(argv), i)]) for i, h in enumerate(hosts[:layout.nnodes])]


def _roles(layout: Parallelism, hosts: list[str]) -> dict[str, str]:
    from ..launch.parallel import arithmetic

    return arithmetic(layout, hosts, {}).roles


def _ray_program(argv: list[str]) -> list[str]:
    """``ray`` as the engine's environment has it: the ``ray`` beside a console script named by its path, ``python -m
    ray.scripts.scripts`` for a command run by a python; the command's environment assignments kept."""
    words, env = strip_assignments(list(argv))
    program = words[0]
    if os.path.basename(program).startswith("python"):
        return [*env, program, "-m", "ray.scripts.scripts"]
    return [*env, os.path.join(os.path.dirname(program), "ray") if "/" in program else "ray"]


class FleetSmoke(Smoke):
    """A smoke launch across the nodes ``options.hosts`` (the head first), each over its own connection."""

    def __init__(self, options: SmokeOptions, view: SmokeView):
        super().__init__(options, view)
        self.layout = parallelism(self.command, list(options.argv))
        self.parts = node_parts(self.layout, list(options.argv), list(options.hosts))
        self.fleet: FleetResult | None = None
        self.nodes: list[Node] = []
        self.launched: list[Run] = []

    def preflight(self) -> None:
        """The fleet audit of every node over this smoke's connections; stop on a node not reached, a node's own
        problem (port, leftovers, a checkpoint missing), or a BLOCKED fleet (unless --launch-anyway)."""
        hosts = self.options.hosts
        self.session.note("connect", f"ssh {', '.join(hosts)}")
        options = FleetOptions(hosts=hosts, argv=self.options.argv, ssh_config=self.options.ssh_config,
                               runs_dir=self.options.runs_dir)
        fleet, self.nodes = audit_nodes(options, [self.session.remotes[h] for h in hosts], self.port, self.session.note)
        self.fleet = fleet
        self.remote_engine = self.nodes[0].engine  # the head's record, scan and runs directory
        lost = [a for a in fleet.nodes if not a.reached]
        if lost:
            raise SSHError("; ".join(a.error for a in lost))
        problems = [f"{a.host}: {p}" for a in fleet.nodes for p in a.problems]
        if problems:
            raise Stop(SmokeVerdict.BLOCKED, "; ".join(problems))
        self.session.note("fleet", f"{fleet.verdict}: " + _fleet_line(fleet))
        if fleet.verdict == Verdict.BLOCKED and not self.options.launch_anyway:
            raise Stop(SmokeVerdict.BLOCKED, f"the fleet audit says BLOCKED: {_blocked_by(fleet)}; nothing launched "
                                             "(--launch-anyway to launch regardless)")

    def launch(self, argv: tuple[str, ...] | list[str]) -> Watch:
        """Each node's part, the head's first, detached with its own watchdog; watched as one launch."""
        runs = []
        dirs = {n.audit.host: n.engine.runs_dir for n in self.nodes}
        for part in node_parts(self.layout, list(argv), list(self.options.hosts)):
            for command in part.commands:
                try:
                    run = self.launcher.launch(command, dirs[part.host], host=part.host)
                except SSHError:
                    raise
                except SpecauditError as exc:
                    raise Stop(SmokeVerdict.FAILED, f"the launch could not be started on {part.host}: {exc}") from None
                runs.append(run)
                self.launched.append(run)
        assert self.fleet is not None  # the preflight came first
        return self.watch_runs(runs, {a.host: a.scan for a in self.fleet.nodes})

    def _result(self, verdict: SmokeVerdict, reason: str, answers: list[Answer], figures: Acceptance | None,
                lossless: Lossless | None) -> SmokeResult:
        result = super()._result(verdict, reason, answers, figures, lossless)
        parts = self.watch.parts if self.watch is not None else []
        root = self.watch.root_part() if self.watch is not None and verdict == SmokeVerdict.FAILED else None
        if root is not None and result.root is not None:
            result.root_node = root.host
            result.reason = f"on {root.host} ({self._role(root.host)}): {result.root.summary}"
        audits = {a.host: a for a in self.fleet.nodes} if self.fleet is not None else {}
        result.nodes = [self._node(part, audits.get(part.host), [p for p in parts if p.host == part.host],
                                   verdict == SmokeVerdict.FAILED) for part in self.parts]
        if self.fleet is not None:
            result.arithmetic = self.fleet.arithmetic
            result.differences = [f"{d.aspect}: " + "; ".join(f"{v} ({', '.join(h)})" for v, h in d.values.items())
                                  for d in self.fleet.differences if d.material]
        return result

    def _role(self, host: str) -> str:
        return next((p.role for p in self.parts if p.host == host), "")

    def _node(self, part: NodePart, audit: NodeAudit | None, watched: list[Part], launch_failed: bool) -> SmokeNode:
        """The node's part as it ended: a crash in its log counts where the launch failed (a launch that came up went
        through any traceback a node printed); an exit of its engine always does."""
        from ..explain.diagnose import root_cause

        failed = next((p for p in watched if p.exited or launch_failed and p.failed), None)
        shown = failed or (watched[-1] if watched else None)
        root = root_cause(failed.log.explanation(), failed.scan, failed.exit_status) if failed is not None else None
        runs = [r for r in self.launched if r.host == part.host]
        return SmokeNode(
            host=part.host, role=part.role, commands=part.commands, preflight=audit.preflight if audit else None,
            scan=_scan_line(audit), verdict=audit.verdict if audit else "", process_groups=[r.pgid for r in runs],
            exit_status=shown.exit_status if shown else None, failed=failed is not None, root=root,
            last_lines=shown.log.lines[-20:] if shown else [],
            logs=[self.launcher.kept[r.directory] for r in runs if r.directory in self.launcher.kept])


def run_fleet_smoke(options: SmokeOptions, view: SmokeView) -> SmokeResult:
    return FleetSmoke(options, view).run()


def _scan_line(audit: NodeAudit | None) -> str:
    if audit is None or audit.scan is None:
        return (audit.scan_problem or audit.error or "not scanned") if audit else "not probed"
    rules = list(dict.fromkeys(f.rule_id for f in audit.scan.blocking))
    shared = f" (the scan of {audit.scanned_on})" if audit.scanned_on else ""
    return f"{audit.scan.verdict}" + (f": {', '.join(rules)}" if rules else "") + shared


def _fleet_line(fleet: FleetResult) -> str:
    material = [d for d in fleet.differences if d.material]
    agree = "the nodes agree" if not material else "the nodes differ in " + ", ".join(d.aspect for d in material)
    sums = f"; launch arithmetic {fleet.arithmetic.status}" if fleet.arithmetic is not None else ""
    return f"{len(fleet.nodes)} nodes, {fleet.scans} scan(s), worst node {fleet.worst_node}; {agree}{sums}"


def _blocked_by(fleet: FleetResult) -> str:
    """The first thing that blocks: a node's scan, then what the nodes must have alike, then the arithmetic."""
    for audit in fleet.nodes:
        if audit.scan is not None and audit.scan.blocking:
            first = audit.scan.blocking[0]
            return f"{audit.host}: {first.title} ({first.location})"
    material = [d for d in fleet.differences if d.material]
    if material:
        d = material[0]
        return f"the nodes differ in {d.aspect}: " + "; ".join(f"{v} ({', '.join(h)})" for v, h in d.values.items())
    if fleet.arithmetic is not None and fleet.arithmetic.blocking:
        check = fleet.arithmetic.blocking[0]
        return f"{check.name}: {check.detail}" + (f" (the engine says: {check.engine_says})" if check.engine_says else "")
    return f"worst node {fleet.worst_node}"

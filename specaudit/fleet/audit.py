"""The fleet audit: every node of a launch over its own connection (ssh, or kubectl exec into a pod), in parallel,
probed by the smoke stage's probe; each distinct engine scanned once, on the node it was found on, for the
checkpoints that node has; where the nodes differ; and the launch arithmetic held against their devices.

Nothing is launched. The stages run in order: reach and probe every node (threads: each one waits on its
connection), group the nodes whose scans must be equal (the same engine files, checkpoints and platform), scan one
node of each group (the engine's files copied once, as the smoke preflight copies them), compare, and add up.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..core.errors import SpecauditError
from ..launch.command import parse_launch_command
from ..launch.parallel import Arithmetic, arithmetic, parallelism
from ..smoke import RUNS_DIR
from ..smoke.remote import SSHError, Transport
from ..smoke.session import SmokeOptions, Stop
from ..tree.provenance import invocation
from .compare import differences
from .kubectl import Cluster
from .node import Node, probe, transport
from .results import FleetResult, NodeAudit, ParallelGate

# What a gate's code names when it reads the parallel layout.
_PARALLEL_NAMES = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "draft_tensor_parallel_size",
                   "tp_size", "pp_size", "dp_size", "nnodes", "world_size")


def default_parallel() -> int:
    """Nodes probed at once, sized to this machine: each waits on its node, and costs here only its ssh client (a key
    exchange) and the reading of its answer; a few per core keeps the cores busy without a queue of handshakes."""
    return 8 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class FleetOptions:
    hosts: tuple[str, ...]  # as ssh names them, or pod/NAME
    argv: tuple[str, ...]  # the launch command, the head's
    ssh_config: str | None = None
    cluster: Cluster = field(default_factory=Cluster)
    runs_dir: str = RUNS_DIR  # where the nodes' launches keep their runs (their leftovers are looked for there)
    workers: int = field(default_factory=default_parallel)  # nodes probed at once


def audit_fleet(options: FleetOptions) -> FleetResult:
    # The ways in, made here: an interruption closes them all, which ends every command still waiting on one.
    remotes = [transport(h, options.ssh_config, options.cluster) for h in _hosts(options)]
    try:
        result, _ = audit_nodes(options, remotes)
    finally:
        for remote in remotes:
            remote.close()
    return result


def audit_nodes(options: FleetOptions, remotes: list[Transport], head_port: int = 0,
                note: Callable[[str, str], None] | None = None) -> tuple[FleetResult, list[Node]]:
    """The audit over ways in the caller made, one a node in the order of ``options.hosts``, and left open for it (a
    multi-node smoke launches over them: fleet/smoke.py): the result and the nodes as probed. ``head_port``: the port
    the head serves on, looked at by its probe (0: none); ``note(phase, text)``: each node's events as they come."""
    _hosts(options)
    command = parse_launch_command(list(options.argv))
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    started = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=max(1, min(options.workers, len(options.hosts))))
    try:
        nodes = list(pool.map(lambda ir: probe(ir[1], SmokeOptions(host=ir[1].host, argv=options.argv,
                                                                   ssh_config=options.ssh_config, runs_dir=options.runs_dir),
                                               command, started, head_port if ir[0] == 0 else 0, note),
                              enumerate(remotes)))
    except BaseException:
        for remote in remotes:
            remote.close()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    # In this thread, one after another: a cold scan forks a process pool to parse in, which is safe only where
    # no other thread of this process is mid-work.
    scans = _scan_groups(nodes)
    audits = [n.audit for n in nodes]
    layout = parallelism(command, list(options.argv))
    reached = [a for a in audits if a.reached]
    method = next((a.scan.method.method for a in reached if a.scan and a.scan.method), None)
    sums: Arithmetic | None = arithmetic(layout, list(options.hosts), {a.host: a.gpus for a in audits}, method)
    return FleetResult(
        command=list(options.argv), engine=command.engine, target=command.model, hosts=list(options.hosts),
        started=started_at, nodes=audits, differences=differences(audits), arithmetic=sums,
        parallel_gates=_parallel_gates(audits), scans=scans, seconds=round(time.monotonic() - started, 2),
        provenance=invocation(", ".join(f"{a.host}:{a.preflight.engine_root}" for a in reached if a.preflight))), nodes


def _hosts(options: FleetOptions) -> tuple[str, ...]:
    if not options.hosts:
        raise SpecauditError("name the nodes: HOST..., --hosts-file, or --selector")
    twice = sorted(h for h, count in Counter(options.hosts).items() if count > 1)  # linear: a hosts file may be long
    if twice:
        raise SpecauditError(f"a node is named twice: {', '.join(twice)}")
    return options.hosts


def _scan_groups(nodes: list[Node]) -> int:
    """Scan one node of each group of equal scan keys; the others of its group take its scan. Returns the scans made."""
    groups: dict[str, list[Node]] = {}
    for node in nodes:
        key = node.scan_key
        if node.audit.reached and key is not None:
            groups.setdefault(key, []).append(node)
    for group in groups.values():
        head = group[0].audit
        _scan(group[0])
        for node in group[1:]:
            node.audit.scan, node.audit.scan_problem, node.audit.scanned_on = head.scan, head.scan_problem, head.host
    return len(groups)


def _scan(node: Node) -> None:
    audit = node.audit
    missing = [c for c in audit.checkpoints if c.role == "target" and not c.present and c.path.startswith(("/", "~", "."))]
    if missing:
        audit.scan_problem = f"not scanned: the target {missing[0].path} is not on the node"
        return
    begun = time.monotonic()
    try:
        audit.scan = node.engine.scan_engine(node.info)
    except (SSHError, Stop, SpecauditError) as exc:
        audit.scan_problem = exc.reason if isinstance(exc, Stop) else str(exc)
    audit.seconds = round(audit.seconds + time.monotonic() - begun, 2)
    audit.timeline = node.session.timeline


def _parallel_gates(audits: list[NodeAudit]) -> list[ParallelGate]:
    """The gates of each scanned engine whose code reads the parallel layout, as each node's scan decided them."""
    found: dict[tuple[str, str, str], ParallelGate] = {}
    for audit in audits:
        if audit.scan is None:
            continue
        for finding in audit.scan.findings:
            if not any(name in finding.code for name in _PARALLEL_NAMES):
                continue
            key = (finding.rule_id, finding.location, finding.status)
            gate = found.setdefault(key, ParallelGate([], finding))
            gate.hosts.append(audit.host)
    return list(found.values())

"""One node of a fleet: reached over its own connection, probed by the smoke stage's probe (the engine, its RECORD
drift, GPUs, the checkpoints, and the node's patch state), and read into a ``NodeAudit``. Its engine is scanned
later, once per distinct engine (audit.py)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from ..core.errors import SpecauditError
from ..launch.command import LaunchCommand
from ..results.outcome import Event
from ..smoke.preflight import RemoteEngine
from ..smoke.remote import Remote, SSHError, Transport
from ..smoke.session import SmokeOptions, Stop
from ..tree.provenance import state_problem
from .kubectl import POD_PREFIX, Cluster, Kubectl
from .results import BundleState, CheckpointDigest, Dependency, NodeAudit


class NodeSession:
    """What the preflight needs of a node (smoke.preflight.Node): the options, the way in, a timeline; ``echo`` sees
    each event as it comes, in the node's name (a multi-node smoke's live view)."""

    def __init__(self, options: SmokeOptions, remote: Transport, started: float,
                 echo: Callable[[str, str], None] | None = None):
        self.options, self.remote, self.started, self.echo = options, remote, started, echo
        self.timeline: list[Event] = []

    def note(self, phase: str, text: str, at: float | None = None) -> None:
        self.timeline.append(Event(round((at or time.monotonic()) - self.started, 2), phase, text))
        if self.echo is not None:
            self.echo(phase, f"{self.options.host}: {text}")


@dataclass
class Node:
    """A node being audited: its session, the preflight's engine, what the probe said, and the audit so far."""

    audit: NodeAudit
    session: NodeSession
    engine: RemoteEngine
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def scan_key(self) -> str | None:
        """Equal on two nodes whose scans must be equal: the engine's files, the checkpoints, the platform."""
        if self.audit.engine_digest is None:
            return None
        parts = [self.audit.engine_digest, self.audit.platform,
                 *[(c.role, c.path, c.present, c.config_sha256, c.headers_sha256) for c in self.audit.checkpoints]]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def close(self) -> None:
        self.session.remote.close()


def transport(host: str, ssh_config: str | None, cluster: Cluster) -> Transport:
    return Kubectl(host, cluster) if host.startswith(POD_PREFIX) else Remote(host, ssh_config)


def probe(remote: Transport, options: SmokeOptions, command: LaunchCommand, started: float, port: int = 0,
          echo: Callable[[str, str], None] | None = None) -> Node:
    """Reach the node and probe it (``port``: whether it is free there; 0: not looked at); what fails is the
    audit's ``error`` (not reached) or ``probe_problem`` (reached, and the probe refused there), never an exception."""
    begun = time.monotonic()
    host = remote.host
    session = NodeSession(options, remote, started, echo)
    node = Node(NodeAudit(host, "kubectl" if isinstance(remote, Kubectl) else "ssh", ""), session,
                RemoteEngine(session, command, port))
    try:
        session.note("connect", f"{node.audit.transport} {host}")
        remote.connect()
        node.info = node.engine.probe()
        read_probe(node, command)
    except SSHError as exc:
        node.audit.error = str(exc)
    except (Stop, SpecauditError) as exc:
        node.audit.probe_problem = exc.reason if isinstance(exc, Stop) else str(exc)
    node.audit.seconds = round(time.monotonic() - begun, 2)
    node.audit.timeline = session.timeline
    return node


def read_probe(node: Node, command: LaunchCommand) -> None:
    info, audit = node.info, node.audit
    audit.preflight = node.engine.record
    engine = info.get("engine")
    audit.engine_digest = engine.get("content") if engine else None
    audit.platform = "cuda" if audit.preflight is not None and audit.preflight.gpus else "cpu"
    roles = {command.model: "target", command.speculative.get("model"): "drafter"}
    audit.checkpoints = [checkpoint_digest(roles.get(path, "model"), path, entry, model_line)
                         for (path, entry), model_line in zip(info.get("checkpoints", {}).items(),
                                                             audit.preflight.models if audit.preflight else [])]
    audit.bundles, audit.patch_problem = bundle_states(info.get("patches"))
    audit.dependencies = dependency_states((engine or {}).get("dependencies") or {}, info["python"].get("markers"),
                                           node.audit.host)


def dependency_states(found: Any, markers: Any, host: str) -> list[Dependency]:
    """The libraries the probe found beside the engine, each against the requirements on it whose markers hold on the
    node (its Python, platform and machine: the probe's ``markers``)."""
    shaped = isinstance(found, dict) and isinstance(markers, dict) and all(
        isinstance(entry, dict) and isinstance(entry.get("installed"), (str, type(None)))
        and isinstance(entry.get("requires"), list)
        and all(isinstance(r, dict) and isinstance(r.get("by"), str) and isinstance(r.get("line"), str)
                for r in entry["requires"]) for entry in found.values())
    if not shaped:
        raise SpecauditError(f"the probe's answer from {host}: its dependencies are not the probe's")
    out = []
    for name, entry in sorted(found.items()):
        required, met = [], True
        for requirement in entry["requires"]:
            try:
                parsed = Requirement(requirement["line"])
                if parsed.marker is not None and not parsed.marker.evaluate({**markers, "extra": ""}):
                    continue
            except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
                continue  # not a requirement pip would read either
            required.append(f"{requirement['by']}: {requirement['line'].partition(';')[0].strip()}"[:200])
            installed = entry["installed"]
            met = met and installed is not None and _meets(parsed, installed)
        out.append(Dependency(str(name)[:100], entry["installed"] and entry["installed"][:100], required,
                              met if required else None))
    return out


def _meets(requirement: Requirement, installed: str) -> bool:
    try:
        return requirement.specifier.contains(Version(installed), prereleases=True)
    except InvalidVersion:
        return False


def checkpoint_digest(role: str, path: str, entry: dict[str, Any], where: str) -> CheckpointDigest:
    config = entry.get("config")
    files = entry.get("files") or {}
    headers = None
    if any("header" in f for f in files.values()):
        digest = hashlib.sha256()
        for name in sorted(files):
            f = files[name]
            digest.update(json.dumps([name, f.get("size"), f.get("header"), f.get("ranges"), f.get("text")]).encode())
        headers = digest.hexdigest()
    return CheckpointDigest(role, path, config is not None, where,
                            hashlib.sha256(config.encode()).hexdigest() if config is not None else None, headers,
                            len(files))


def bundle_states(patches: dict[str, Any] | None) -> tuple[list[BundleState], str]:
    """The bundles the node's patch state names, each as its files are now (tree/provenance.py reads the same state
    for a local tree; patch --status judges it the same way)."""
    if not patches:
        return [], ""
    if "error" in patches:
        return [], f"{patches['dir']}/state.json: unreadable ({patches['error']})"
    state, current = patches.get("state"), patches.get("current") or {}
    problem = state_problem(state) or ("" if isinstance(current, dict) else "the files' hashes are not a mapping")
    if problem or not isinstance(state, dict):
        return [], f"{patches['dir']}/state.json: not a patch state ({problem})"
    out = []
    for bundle, entry in sorted(state["bundles"].items()):
        files = sorted(entry.get("files", [])) if isinstance(entry, dict) else []
        drifted = [rel for rel in files if current.get(rel) != (state["files"].get(rel) or {}).get("applied")]
        if patches.get("interrupted"):
            out.append(BundleState(bundle, files, "interrupted", "a patch run was stopped mid-way: the next "
                                   "`specaudit patch --status` on the node rolls it back"))
        elif drifted:
            out.append(BundleState(bundle, files, "drifted", f"changed since the bundle was applied: {', '.join(drifted)}"))
        else:
            out.append(BundleState(bundle, files, "applied", f"{len(files)} file(s) as the bundle left them"))
    return out, ""

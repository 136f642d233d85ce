"""Where the nodes of a fleet differ: each aspect a multi-node launch needs alike, and the values each node has."""

from __future__ import annotations

from collections.abc import Callable

from .results import Difference, NodeAudit

# (aspect, what a node has, whether a multi-node launch needs it alike on every node)
_ASPECTS: list[tuple[str, Callable[[NodeAudit], str | None], bool]] = [
    ("engine release", lambda n: n.preflight.engine if n.preflight else None, True),
    ("engine files", lambda n: (n.engine_digest or "")[:12] or None, True),
    ("files that differ from RECORD", lambda n: ", ".join(n.preflight.modified_files) or "none" if n.preflight else None,
     True),
    ("patch bundles", lambda n: ", ".join(f"{b.bundle} ({b.state})" for b in n.bundles) or "none"
     if n.preflight else None, True),
    ("Python", lambda n: n.preflight.python.rsplit(" (", 1)[-1].rstrip(")") if n.preflight else None, True),
    ("static scan", lambda n: _scan_line(n), True),
    ("GPUs", lambda n: _gpus(n), False),
    ("engine location", lambda n: n.preflight.engine_root if n.preflight else None, False),
]


def differences(nodes: list[NodeAudit]) -> list[Difference]:
    """Each aspect on which the reached nodes do not all agree (a node not reached is left out of the comparison:
    its verdict says it was not reached)."""
    reached = [n for n in nodes if n.reached and n.preflight is not None]
    out = []
    aspects = list(_ASPECTS)
    roles = sorted({(c.role, c.path) for n in reached for c in n.checkpoints})
    for role, path in roles:
        aspects += [(f"{role} {path}: present", _checkpoint(role, path, "present"), True),
                    (f"{role} {path}: config.json", _checkpoint(role, path, "config"), True),
                    (f"{role} {path}: safetensors headers", _checkpoint(role, path, "headers"), True)]
    # The libraries the launch runs on: the nodes of one launch load the same configs and run the same collectives.
    for name in sorted({d.name for n in reached for d in n.dependencies}):
        aspects.append((f"dependency {name}", _dependency(name), True))
    for aspect, value_of, material in aspects:
        values: dict[str, list[str]] = {}
        for node in reached:
            values.setdefault(value_of(node) or "-", []).append(node.host)
        if len(values) > 1:
            out.append(Difference(aspect, values, material))
    return out


def _checkpoint(role: str, path: str, what: str) -> Callable[[NodeAudit], str | None]:
    def value(node: NodeAudit) -> str | None:
        found = next((c for c in node.checkpoints if (c.role, c.path) == (role, path)), None)
        if found is None:
            return None
        if what == "present":
            return "present" if found.present else "missing"
        digest = found.config_sha256 if what == "config" else found.headers_sha256
        return f"sha256 {digest[:12]}" if digest else "none"

    return value


def _dependency(name: str) -> Callable[[NodeAudit], str | None]:
    def value(node: NodeAudit) -> str | None:
        return next((d.line for d in node.dependencies if d.name == name), "not installed")

    return value


def _scan_line(node: NodeAudit) -> str | None:
    """The verdict and the gates that block it, by rule (a drafter check's location names the node)."""
    if node.scan is None:
        return node.scan_problem or None
    rules = list(dict.fromkeys(f.rule_id for f in node.scan.blocking))
    return f"{node.scan.verdict}" + (f": {', '.join(rules)}" if rules else "")


def _gpus(node: NodeAudit) -> str | None:
    if node.preflight is None:
        return None
    if not node.preflight.nvidia_smi:
        return "no nvidia-smi"
    names = sorted({g.get("name", "?") for g in node.preflight.gpus})
    return f"{len(node.preflight.gpus)} x {', '.join(names)}" if names else "0"

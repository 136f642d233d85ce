"""The nodes of a fleet, as the user names them: hosts as ``ssh`` names them (``~/.ssh/config`` aliases, ``user@host``),
a file of them (one a line, ``#`` comments), and Kubernetes pods (``pod/NAME``, or every running pod a label selector
picks, through the user's ``kubectl``)."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import SpecauditError
from .kubectl import POD_PREFIX, Cluster


def node_names(hosts: tuple[str, ...], hosts_file: str | None = None, selector: str | None = None,
               cluster: Cluster | None = None) -> tuple[str, ...]:
    """Every node named, in order: the hosts given, then the file's, then the selector's pods; the first is the head."""
    names = list(hosts)
    if hosts_file:
        try:
            text = Path(hosts_file).expanduser().read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SpecauditError(f"--hosts-file {hosts_file}: {exc.strerror}") from None
        names += [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]
    if selector:
        names += [POD_PREFIX + pod for pod in (cluster or Cluster()).pods(selector)]
    for name in names:
        if name.startswith("-") or any(c.isspace() for c in name) or name in ("", POD_PREFIX):
            raise SpecauditError(f"not a host or pod name: {name!r}")
    return tuple(names)

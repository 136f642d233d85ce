"""The matrix of targets x engine releases: each cell's verdict and blocking gates, and the answers above the grid.
Plain typed data, as scan.py is for one scan."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.types import Verdict, worst
from .scan import ScanResult


@dataclass(frozen=True)
class Gate:
    rule_id: str
    title: str
    location: str


@dataclass(frozen=True)
class Cell:
    target: str
    release: str  # "vllm 0.17.0"
    verdict: str
    blocking: tuple[Gate, ...]  # in the order the launch meets them (a DEGRADED cell: what degrades it)
    bundle: str | None = None  # the bundle that covers this release for this target, when it is blocked
    bundle_target: str | None = None  # the name `specaudit patch --target` takes for it (kimi_k2)
    patched: str | None = None  # the verdict with the bundle's edits; None: no bundle, or it could not apply
    patch_problem: str = ""  # why the bundle could not be planned here
    synthesized_from: str | None = None  # no shipped bundle: the supported class a synthesized one derives from


@dataclass(frozen=True)
class Answer:
    """For one target: per engine, the first release of the range from which it works unpatched (and stays
    working), and what to do on each release where it is not READY."""

    target: str
    works_from: tuple[str, ...]  # one release per engine where there is one
    remedies: dict[str, str]  # release -> "specaudit patch ..." or "upgrade to ..." or why neither


@dataclass
class Matrix:
    targets: list[str]
    releases: list[str]  # in version order, per engine
    cells: list[Cell]
    answers: list[Answer]
    results: list[ScanResult] = field(repr=False, default_factory=list)  # every cell's scan, for SARIF
    method: str = "eagle3"  # the speculative method the launches name ("": none, the engine infers it)

    def cell(self, target: str, release: str) -> Cell:
        return next(c for c in self.cells if c.target == target and c.release == release)

    @property
    def exit_code(self) -> int:
        return worst({Verdict(c.verdict).exit_code for c in self.cells})

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "targets": self.targets, "releases": self.releases,
                "cells": [asdict(c) for c in self.cells],
                "answers": [asdict(a) for a in self.answers], "exit_code": self.exit_code}

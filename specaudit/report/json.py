"""JSON: each result's own ``to_dict``, the form the other tools read."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..results.scan import Comparison, ScanResult
from .renderer import Renderer

if TYPE_CHECKING:
    from ..fleet.results import FleetResult
    from ..results.matrix import Matrix
    from ..results.outcome import Explanation, SmokeResult


class Json(Renderer[str]):
    def scan(self, result: ScanResult) -> str:
        return _dump(result.to_dict())

    def comparison(self, comparison: Comparison) -> str:
        return _dump(comparison.to_dict())

    def explanation(self, explanation: Explanation) -> str:
        return _dump(explanation.to_dict())

    def smoke(self, result: SmokeResult) -> str:
        return _dump(result.to_dict())

    def matrix(self, matrix: Matrix) -> str:
        # The cells hold no scans: each release's provenance comes from the scans behind them, once per release.
        provenance = {f"{r.tree.engine} {r.tree.version}": asdict(r.provenance) for r in matrix.results if r.provenance}
        return _dump({**matrix.to_dict(), "provenance": provenance})

    def fleet(self, result: FleetResult) -> str:
        return _dump(result.to_dict())


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"

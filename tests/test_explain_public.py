"""explain on failure logs pasted in public vLLM and SGLang issue threads (tests/fixtures/logs/public, each kept as
the thread shows it; index.yaml names the thread, the form of the paste and the thread's root-cause line): every
one is recognised as a failed launch (exit 1) and its root cause names that line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specaudit.explain.diagnose import root_cause
from specaudit.explain.signatures import explain_file

from helpers import specaudit

PUBLIC = Path(__file__).parent / "fixtures" / "logs" / "public"
INDEX = yaml.safe_load((PUBLIC / "index.yaml").read_text(encoding="utf-8"))["logs"]


def test_the_index_lists_every_log_once_with_its_thread():
    files = [entry["file"] for entry in INDEX]
    assert sorted(files) == sorted(p.name for p in PUBLIC.glob("*.log")) and len(set(files)) == len(files)
    for entry in INDEX:
        assert entry["url"].startswith(("https://github.com/vllm-project/vllm/", "https://github.com/sgl-project/sglang/"))
        assert entry["engine"] in ("vllm", "sglang") and entry["root"] and entry["form"]
        # the root-cause line is in the log as pasted (the index does not name what the paste does not show)
        assert entry["root"] in (PUBLIC / entry["file"]).read_text(encoding="utf-8")


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_each_public_log_is_a_failed_launch_with_its_root_cause_named(entry):
    explanation = explain_file(str(PUBLIC / entry["file"]))
    assert explanation.exit_code == 1, f"not recognised: {entry['url']}"
    root = root_cause(explanation, None)
    assert root is not None and entry["root"] in root.summary, (root.summary if root else None, entry["url"])


def test_the_corpus_covers_the_forms_and_methods_users_paste():
    forms = {form for entry in INDEX for form in entry["form"]}
    methods = {entry["method"].lower() for entry in INDEX}
    assert {"tail", "lone", "pydantic", "device", "scheduler", "joined", "chained", "prefixed"} <= forms
    assert {"mtp", "eagle", "eagle3", "draft_model", "dflash", "nextn"} <= methods
    assert {entry["engine"] for entry in INDEX} == {"vllm", "sglang"}


def test_the_command_exits_1_on_a_lone_pasted_line(tmp_path):
    # vllm-project/vllm#29448: the whole paste is the exception line
    proc = specaudit("explain", str(PUBLIC / "vllm-29448-r1-mtp-keyerror.log"), env_cache=tmp_path / "cache")
    assert proc.returncode == 1, proc.stderr
    assert "model.layers.61.mtp_block" in proc.stdout and "Traceback" not in proc.stderr


def corpus_figures() -> dict[str, tuple[int, int, int]]:
    """(recognised, right root cause, logs) over the corpus and over its held-out part."""
    figures = {}
    for name, entries in (("all", INDEX), ("held out", [e for e in INDEX if e.get("held_out")])):
        recognised = right = 0
        for entry in entries:
            explanation = explain_file(str(PUBLIC / entry["file"]))
            root = root_cause(explanation, None)
            recognised += explanation.exit_code == 1
            right += bool(root and entry["root"] in root.summary)
        figures[name] = (recognised, right, len(entries))
    return figures


if __name__ == "__main__":
    for name, (recognised, right, total) in corpus_figures().items():
        print(f"{name:<9} recognised {recognised}/{total}, right root cause {right}/{total}")

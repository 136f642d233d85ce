"""The command line: exit codes, one-line errors for bad input, reports written, launch commands read."""

from __future__ import annotations

import json

import pytest

from specaudit.core.errors import SpecauditError
from specaudit.launch.command import parse_launch_command

from conftest import vllm_tree
from helpers import ROOT, assert_one_line_error, specaudit


@pytest.fixture
def tiny_tree(make_tree):
    return make_tree({
        "vllm/model_executor/models/interfaces.py": "from typing import Protocol\nclass P(Protocol):\n    x = 1\n",
        "vllm/model_executor/models/broken.py": "def f(:\n",
        "vllm/model_executor/models/registry.py": "_TEXT = {'LlamaForCausalLM': ('llama', 'LlamaForCausalLM')}\n",
    })


def test_bad_inputs_get_one_line_and_exit_2(tmp_path, tiny_tree):
    cache = tmp_path / "cache"
    assert_one_line_error(specaudit("scan", str(tmp_path / "nowhere"), env_cache=cache), "no such file")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(specaudit("scan", str(empty), env_cache=cache), "not an engine tree")
    assert_one_line_error(specaudit("scan", str(tiny_tree), "--target", "kimi-k25", env_cache=cache),
                          "did you mean kimi-k2.5")
    assert_one_line_error(specaudit("scan", str(tiny_tree), "--target", "llama3", "--speculative-config", "{method:",
                                    env_cache=cache), "--speculative-config is not valid JSON")
    assert_one_line_error(specaudit("scan", str(tiny_tree), "--model", str(empty), env_cache=cache), "no config.json")
    (empty / "config.json").write_text("{not json")
    assert_one_line_error(specaudit("scan", str(tiny_tree), "--model", str(empty), env_cache=cache), "malformed JSON")
    assert_one_line_error(specaudit("scan", str(tiny_tree), "--", "text-generation-launcher", "--model-id", "x",
                                    env_cache=cache), "not a launch command specaudit knows")
    assert_one_line_error(specaudit("scan", str(tiny_tree), "--", "python3", "-m", "sglang.launch_server",
                                    "--model-path", "x", env_cache=cache), "the launch command is sglang's")
    assert not (ROOT / "reports" / "scan-vllm-0.0.1-llama3.json").exists()


@pytest.mark.network  # the CLI asks the package index
def test_unknown_release_is_a_clear_error(tmp_path):
    proc = specaudit("scan", "vllm==0.0.999", "--target", "llama3", env_cache=tmp_path / "cache")
    assert_one_line_error(proc, "vllm==0.0.999")


def test_unparsable_files_are_skipped_and_listed(tiny_tree, tmp_path):
    proc = specaudit("scan", str(tiny_tree), "--format", "json", "--out", str(tmp_path), env_cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert "vllm/model_executor/models/broken.py" in proc.stdout
    report = json.loads((tmp_path / "scan-vllm-0.0.1-landscape.json").read_text())
    assert list(report["skipped"]) == ["vllm/model_executor/models/broken.py"]


def test_launch_command_is_read_as_vllm_reads_it(tmp_path):
    model = tmp_path / "kimi k2.5 $(rm -rf)"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2"}))
    tree = vllm_tree("0.14.0")
    proc = specaudit("scan", str(tree.root), "--format", "md", "--format", "html", "--out", str(tmp_path), "--",
                     "python3", "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                     "--tensor_parallel_size", "8", "--speculative-config",
                     '{"method": "eagle3", "model": "/data/eagle3/output_10k/4", "num_speculative_tokens": 5}',
                     env_cache=tmp_path / "cache")
    assert proc.returncode == 1, proc.stderr
    assert "BLOCKED" in proc.stdout and "vllm/config/speculative.py" in proc.stdout
    md = next(tmp_path.glob("scan-vllm-0.14.0-*.md")).read_text()
    assert "## Verdict: BLOCKED" in md and "vllm-eagle3-interface" in md
    # Pastes into an issue: the verdict and gates open, the long evidence folded.
    assert md.index("## Verdict") < md.index("<details><summary>the engine's code</summary>")
    assert "<details><summary>The registered architectures that satisfy it</summary>" in md
    html = next(tmp_path.glob("scan-vllm-0.14.0-*.html")).read_text()
    assert 'class="verdict BLOCKED"' in html


def test_parse_forms():
    command = parse_launch_command(["VLLM_USE_V1=1", "vllm", "serve", "/m", "-tp", "8", "--max_model_len=32768",
                                    "--trust-remote-code", "--speculative-config.method", "eagle3",
                                    "--speculative-config.num_speculative_tokens", "5"])
    assert (command.engine, command.model) == ("vllm", "/m")
    options = command.options
    assert options["tensor-parallel-size"] == "8"
    assert options["max-model-len"] == "32768" and options["trust-remote-code"] is True
    assert command.speculative == {"method": "eagle3", "num_speculative_tokens": 5}
    command = parse_launch_command(["python3", "-m", "sglang.launch_server", "--model", "/m b", "--tp", "8",
                                    "--speculative-algorithm", "NEXTN", "--speculative-draft-model", "/d",
                                    "--trust-remote-code", "--speculative-eagle-topk=1"])
    assert (command.engine, command.model) == ("sglang", "/m b")
    assert command.options["tp_size"] == 8 and command.options["speculative_eagle_topk"] == 1
    # As given: NEXTN is SGLang's alias of EAGLE, which the release's own resolution says (methods/).
    assert command.speculative == {"method": "nextn", "model": "/d"}
    with pytest.raises(SpecauditError, match="not a launch command specaudit knows"):
        parse_launch_command(["python3", "-m", "tgi.server"])
    with pytest.raises(SpecauditError, match="not valid JSON"):
        parse_launch_command(["vllm", "serve", "/m", "--speculative-config", "{"])

"""Facts about real SGLang releases, each verified by reading the release's source (paths given per test)."""

from __future__ import annotations

import json

import pytest

from specaudit.launch.request import Launch
from specaudit.launch.target import load_model
from specaudit.scan.audit import scan

from conftest import engine_scan, engine_tree
from helpers import specaudit

REGISTRY = "sglang-architecture-registered"
LAYERS = "sglang-eagle3-layers-to-capture"
EMBED = "sglang-eagle-embed-and-head"


@pytest.mark.parametrize("preset", ["kimi-k2.5", "deepseek-v3", "llama3", "qwen3"])
def test_0523_all_four_ready(preset):
    # 0.5.23: kimi_k25.py EntryClass = [KimiK25ForConditionalGeneration], which defines
    # set_eagle3_layers_to_capture / get_embed_and_head itself, delegating to its DeepseekV3 language model;
    # deepseek_v2.py DeepseekV3ForCausalLM(DeepseekV2ForCausalLM) inherits them; llama.py and qwen3.py
    # define them. The calls: model_runner_components/attention_backend_setup.py (hasattr-guarded) and
    # speculative/pp_draft_embedding.py.
    result = engine_scan("sglang==0.5.23", preset)
    assert result.verdict == "READY", [(f.rule_id, f.why) for f in result.findings]
    statuses = {f.rule_id: f.status for f in result.findings}
    assert statuses[LAYERS] == statuses[EMBED] == statuses[REGISTRY] == "passes"


def test_058_kimi_k25_blocked_because_no_module_provides_it():
    # 0.5.8 has no kimi_k25.py: no EntryClass names KimiK25ForConditionalGeneration.
    result = engine_scan("sglang==0.5.8", "kimi-k2.5")
    assert result.verdict == "BLOCKED"
    assert [f.rule_id for f in result.blocking] == [REGISTRY]
    assert result.blocking[0].file == "sglang/srt/models/registry.py"
    assert "Model architectures ['KimiK25ForConditionalGeneration'] are not supported for now" in result.blocking[0].error


def test_058_deepseek_v3_ready_through_inheritance():
    # deepseek_v2.py: EntryClass = [DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, DeepseekV32ForCausalLM];
    # `class DeepseekV3ForCausalLM(DeepseekV2ForCausalLM): pass` inherits both methods.
    result = engine_scan("sglang==0.5.8", "deepseek-v3")
    assert result.verdict == "READY"
    layers = next(f for f in result.findings if f.rule_id == LAYERS)
    assert "sglang.srt.models.deepseek_v2.DeepseekV2ForCausalLM" in layers.why
    # 0.5.8 calls it unguarded from three places: model_runner.py (initialize, _dummy_run) and cuda_graph_runner.py
    assert len(layers.also) == 2


@pytest.mark.parametrize("release,error", [
    # 0.5.8 model_runner.py: self.model.set_eagle3_layers_to_capture(...) with no guard
    ("sglang==0.5.8", "AttributeError: 'Glm4ForCausalLM' object has no attribute 'set_eagle3_layers_to_capture'"),
    # 0.5.23 attention_backend_setup.py: `if not hasattr(model, "set_eagle3_layers_to_capture"): raise ValueError(...)`
    ("sglang==0.5.23", "ValueError: Model Glm4ForCausalLM does not implement set_eagle3_layers_to_capture, which "
                       "EAGLE3 aux hidden-state capture requires."),
])
def test_a_class_with_one_required_method_but_not_the_other_is_not_ready(tmp_path, release, error):
    # glm4.py in both releases: Glm4ForCausalLM defines get_embed_and_head, not set_eagle3_layers_to_capture.
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["Glm4ForCausalLM"], "model_type": "glm4"}))
    result = scan(engine_tree(release), Launch(load_model(str(tmp_path))))
    assert result.verdict == "BLOCKED"
    statuses = {f.rule_id: f for f in result.findings}
    assert statuses[EMBED].status == "passes"
    missing = statuses[LAYERS]
    assert missing.status == "blocks" and "has no set_eagle3_layers_to_capture" in missing.why
    assert missing.error == error
    assert missing.file.startswith("sglang/srt/model_executor/")


def test_landscape_counts_classes_with_the_called_methods():
    # model_runner_components/attention_backend_setup.py: `if not hasattr(model, "set_eagle3_layers_to_capture"):
    #   raise ...; model.set_eagle3_layers_to_capture(...)` for eagle3; speculative/pp_draft_embedding.py calls
    #   get_embed_and_head only on targets without get_embed_and_head_for_draft: no contract of every target.
    land = engine_scan("sglang==0.5.23", None).landscape
    assert land.contract_members == ["set_eagle3_layers_to_capture"]
    rows = {r.architecture: r for r in land.architectures}
    assert len(rows) == 290  # every EntryClass of the plain modules of srt/models
    assert rows["KimiK25ForConditionalGeneration"].conforms is True
    assert rows["Glm4ForCausalLM"].conforms is False
    assert len(land.grep_classes) < len(land.conforming_classes)  # subclasses inherit the methods
    # 0.5.8: model_runner.py calls set_eagle3_layers_to_capture when eagle_use_aux_hidden_state, and
    #   eagle_worker.py `self.target_worker.model_runner.model.get_embed_and_head()` unconditionally.
    older = engine_scan("sglang==0.5.8", None).landscape
    assert older.contract_members == ["get_embed_and_head", "set_eagle3_layers_to_capture"]
    assert {r.architecture: r.conforms for r in older.architectures}["Glm4ForCausalLM"] is False


def test_launch_command_and_side_by_side(tmp_path):
    model = tmp_path / "kimi"
    model.mkdir()
    from specaudit.launch.target import load_preset
    (model / "config.json").write_text(json.dumps(load_preset("kimi-k2.5").config))
    proc = specaudit("scan", str(engine_tree("sglang==0.5.8").root), "--", "python3", "-m", "sglang.launch_server",
                     "--model-path", str(model), "--tp", "8", "--speculative-algorithm", "EAGLE3",
                     "--speculative-draft-model-path", "/data/eagle3/output_10k/4", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                     env_cache=tmp_path / "cache")
    assert proc.returncode == 1, proc.stderr
    assert "BLOCKED" in proc.stdout and "sglang/srt/models/registry.py" in proc.stdout
    proc = specaudit("scan", str(engine_tree("vllm==0.17.0").root), str(engine_tree("sglang==0.5.23").root),
                     "--target", "kimi-k2.5", "--format", "md", "--out", str(tmp_path), env_cache=tmp_path / "cache")
    assert proc.returncode == 1, proc.stderr
    md = (tmp_path / "scan-vllm-0.17.0-sglang-0.5.23-kimi-k2.5.md").read_text()
    assert "| | vllm 0.17.0 | sglang 0.5.23 |" in md and "| verdict | **BLOCKED** | **READY** |" in md


def sglang_launch(tmp_path, release, *arguments):
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}))
    return specaudit("scan", str(engine_tree(release).root), "--format", "json", "--out", str(tmp_path), "--",
                     "python3", "-m", "sglang.launch_server", "--model-path", str(model), *arguments,
                     env_cache=tmp_path / "cache")


@pytest.mark.parametrize("release,arguments,file,message", [
    # 0.5.8 server_args.py _handle_speculative_decoding, under `if self.speculative_algorithm in ("EAGLE", "EAGLE3",
    # "STANDALONE")`: `if self.attention_backend == "trtllm_mha" ...: if self.speculative_eagle_topk > 1: raise
    # ValueError("trtllm_mha backend only supports topk = 1 for speculative decoding.")`
    ("sglang==0.5.8", ["--speculative-algorithm", "EAGLE3", "--attention-backend", "trtllm_mha",
                       "--speculative-num-steps", "3", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"],
     "sglang/srt/server_args.py", "trtllm_mha backend only supports topk = 1 for speculative decoding."),
    # 0.5.23 arg_groups/speculative_hook.py _handle_eagle_family: topk > 1 with page_size > 1 outside
    # ("flashinfer", "fa3", "triton")
    ("sglang==0.5.23", ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                        "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8", "--page-size", "16",
                        "--attention-backend", "torch_native"],
     "sglang/srt/arg_groups/speculative_hook.py", "speculative_eagle_topk > 1 with page_size > 1 is only supported on"),
])
def test_argument_gates_judged_against_the_launch(tmp_path, release, arguments, file, message):
    proc = sglang_launch(tmp_path, release, *arguments)
    assert proc.returncode == 1, proc.stdout[-2000:]
    report = json.loads(next(tmp_path.glob("scan-sglang-*.json")).read_text())
    blocking = [f for f in report["findings"] if f["status"] == "blocks"]
    assert [f["rule_id"] for f in blocking] == ["sglang-speculative-arguments"]
    assert blocking[0]["file"] == file and message in blocking[0]["error"]


def test_argument_gates_pass_for_a_plain_eagle3_launch(tmp_path):
    proc = sglang_launch(tmp_path, "sglang==0.5.23", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps",
                         "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_a_standalone_launch_is_judged_by_its_own_handler_s_checks(tmp_path):
    # 0.5.8 raises "Currently standalone speculative decoding does not support dp attention." for STANDALONE with
    # dp attention (server_args.py _handle_speculative_decoding, under `self.speculative_algorithm == "STANDALONE"`).
    proc = sglang_launch(tmp_path, "sglang==0.5.8", "--speculative-algorithm", "STANDALONE", "--enable-dp-attention")
    assert proc.returncode == 1, proc.stdout[-2000:]
    report = json.loads(next(tmp_path.glob("scan-sglang-*.json")).read_text())
    assert report["method"]["method"] == "standalone" and report["method"]["modeled"]
    blocking = [f for f in report["findings"] if f["status"] == "blocks"]
    assert [f["rule_id"] for f in blocking] == ["sglang-speculative-arguments"]
    assert "standalone speculative decoding does not support dp attention" in blocking[0]["error"]

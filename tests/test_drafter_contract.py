"""The drafter's whole contract (issue 39, item 1): every tensor of an EAGLE-3 head and every head key of its config,
accounted for by the release's own drafter class (scan/drafter/contract.py), on two releases of each engine. Real
tensor names: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's (midlayer.*, fc.weight, norm.weight, lm_head.weight, d2t, t2d).

Facts from the releases' source (read, not run):
- SGLang 0.5.17 / 0.5.23 models/llama_eagle3.py LlamaForCausalLMEagle3.load_weights: midlayer -> layers.0, d2t taken
  as hot_token_id, t2d skipped (`continue`), and every other name loaded only `if param_name in params_dict`: a name
  the model does not build is passed over without a word. LlamaModel builds input_norm only under norm_before_fc.
  Neither release reads norm_before_residual.
- vLLM 0.26.0 / 0.33.0 llama_eagle3.py Eagle3LlamaForCausalLM.load_weights: t2d skipped, d2t renamed
  draft_id_to_target_id; "input_norm." dropped by the loader where LlamaModel's norm_before_fc is off
  (0.26.0 skip_substrs.append, 0.33.0 orig_to_new_substr[...] = None). A "bias" key is read, not as SGLang's fc
  bias: the head's LlamaDecoderLayer.__init__ calls llama.py's (super().__init__), which builds the attention's
  o_proj with ``getattr(config, "attention_bias", False) or getattr(config, "bias", False)`` (0.26.0 llama.py:265,
  0.33.0 :268).
- vLLM's EAGLE-1 head (0.26.0, 0.33.0, 0.34.0 llama_eagle.py): EAGLEConfig renames the drafter's LlamaForCausalLM
  to EagleLlamaForCausalLM for method eagle (transformers_utils/configs/eagle.py:51, f"Eagle{arch}"), which the
  registry maps to llama_eagle.EagleLlamaForCausalLM. Its load_weights defines ``transform`` (every name but
  lm_head gets "model.") and hands ``map(transform, weights)`` to AutoWeightsLoader (0.26.0 llama_eagle.py:182,
  0.33.0 / 0.34.0 :196). LlamaModel builds fc as ``ReplicatedLinear(..., bias=False)`` (0.26.0 :98, 0.33.0 /
  0.34.0 :113), and AutoWeightsLoader.load_weights appends ".bias" to ignore_unexpected_suffixes (utils.py 0.26.0
  :405, 0.33.0 :458, 0.34.0 :469): an fc.bias in the checkpoint is passed over without a word.
  EagleLlamaForCausalLM.__init__ calls ``nn.Module.__init__(self)`` (0.26.0 llama_eagle.py:133, 0.33.0 / 0.34.0
  :148), not LlamaForCausalLM's: it builds ``model`` and ``logits_processor`` and no lm_head (the target's is shared
  after loading). transform leaves "lm_head.weight" as it is, and AutoWeightsLoader._load_module, finding "lm_head"
  neither a child module nor a parameter of the model, passes it over only where _can_skip (0.26.0: skip_prefixes,
  None here, and the rotary skip_substrs; 0.33.0: aliased_params, the tied embeddings among the modules it builds) or
  _can_ignore_unexpected (the ".bias" suffix, on "lm_head." and "lm_head") holds, and else raises ValueError
  "There is no module or parameter named 'lm_head' in EagleLlamaForCausalLM. ..." (utils.py 0.26.0 :395, 0.33.0
  :448, 0.34.0 :459). LlamaModel builds embed_tokens (0.26.0 llama_eagle.py:78, 0.33.0 / 0.34.0 :93): an
  embed_tokens.weight loads.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_degraded import HEAD, TRAINED, degrading, launch, yuhuili_head

from specaudit.core.types import Status, Verdict
from specaudit.scan.audit import audit

from conftest import engine_analysis

analysis = engine_analysis

RELEASES = [("vllm==0.26.0", None, "vllm-drafter-contract"), ("vllm==0.33.0", None, "vllm-drafter-contract"),
            ("sglang==0.5.17", "sglang", "sglang-drafter-contract"),
            ("sglang==0.5.23", "sglang", "sglang-drafter-contract")]


def contract(result, rule_id: str):
    return next(f for f in result.findings if f.rule_id == rule_id)


@pytest.mark.parametrize("release, engine, rule_id", RELEASES)
def test_every_tensor_of_a_well_formed_head_is_accounted_for(tmp_path, release, engine, rule_id):
    result = audit(analysis(release), launch(tmp_path, HEAD, "eagle3", engine))
    finding = contract(result, rule_id)
    assert result.verdict == Verdict.READY and finding.status == Status.PASSES, finding.why
    assert "t2d skipped at" in finding.code and "fc.weight loaded into model.fc.weight" in finding.code
    layer = "model.layers.0.self_attn.qkv_proj.weight" if engine else "model.midlayer.self_attn.q_proj.weight"
    assert f"midlayer.self_attn.q_proj.weight loaded into {layer}" in finding.code
    assert "d2t loaded into " + ("d2t" if engine else "draft_id_to_target_id") in finding.code


@pytest.mark.parametrize("release, engine, rule_id", RELEASES)
def test_a_norm_the_config_does_not_ask_for_is_never_loaded(tmp_path, release, engine, rule_id):
    # The head ships input_norm.weight (a norm before fc) and its config does not set norm_before_fc: the release
    # builds no input_norm and drops the tensor without a word. A partial loss: a warning with its share.
    result = audit(analysis(release), launch(tmp_path, HEAD, "eagle3", engine,
                                             {"input_norm.weight": np.ones(192, np.float32)}))
    finding = contract(result, rule_id)
    assert result.verdict == Verdict.READY and finding.status == Status.WARNS
    assert "does not load input_norm.weight" in finding.why and "1.0% of the drafter's parameters" in finding.why
    assert finding.file == ("sglang/srt/models/llama_eagle3.py" if engine else "vllm/model_executor/models/llama_eagle3.py")
    # With the flag that builds it, the norm loads.
    asked = audit(analysis(release), launch(tmp_path, {**HEAD, "eagle_config": {"norm_before_fc": True}}, "eagle3",
                                            engine, {"input_norm.weight": np.ones(192, np.float32)}))
    assert contract(asked, rule_id).status == Status.PASSES
    assert "input_norm.weight loaded into model.input_norm.weight" in contract(asked, rule_id).code


@pytest.mark.parametrize("release, engine, rule_id, key", [
    ("sglang==0.5.17", "sglang", "sglang-drafter-contract", "norm_before_residual"),
    ("sglang==0.5.23", "sglang", "sglang-drafter-contract", "norm_before_residual")])
def test_a_head_setting_the_release_never_reads_warns(tmp_path, release, engine, rule_id, key):
    result = audit(analysis(release), launch(tmp_path, {**HEAD, key: True}, "eagle3", engine))
    finding = contract(result, rule_id)
    assert result.verdict == Verdict.READY and finding.status == Status.WARNS
    assert f"sets {key} = True" in finding.why and "never reads" in finding.why
    # The other engine reads it: there it is accounted for as read.
    assert f"{key} ignored" in finding.code


# release -> (the line of llama.py's LlamaDecoderLayer.__init__ that reads the bias key, the line of layers/linear.py
# where RowParallelLinear creates its bias from torch.empty under `if bias:`, the line of DefaultModelLoader.load_weights
# that reads what the model's load_weights returned (`... and loaded_weights is not None`), and its check's raise
# "Following weights were not initialized from checkpoint")
UNFILLED = {"vllm==0.26.0": (265, 1633, 436, 467), "vllm==0.33.0": (268, 1757, 512, 569)}


@pytest.mark.parametrize("release", ["vllm==0.26.0", "vllm==0.33.0"])
def test_a_bias_key_builds_an_eagle3_o_proj_bias_no_tensor_fills(tmp_path, release):
    # Not SGLang's fc bias: llama.py's LlamaDecoderLayer.__init__, which the EAGLE-3 head's layer calls
    # (super().__init__), reads it as the attention's bias (0.26.0 llama.py:265, 0.33.0 :268) and builds the attention
    # with bias_o_proj = True: RowParallelLinear's `self.bias = Parameter(torch.empty(...))` (0.26.0 linear.py:1633,
    # 0.33.0 :1757). The EAGLE-3 layer then replaces qkv_proj with bias=getattr(config, "attention_bias", False)
    # (llama_eagle3.py 0.26.0 :53, 0.33.0 :85): no qkv bias. The head ships no o_proj.bias, and
    # Eagle3LlamaForCausalLM.load_weights returns nothing, so DefaultModelLoader.load_weights's
    # `default_enable_weights_track = (model_config.quantization is None and loaded_weights is not None)` is False and
    # track_weights_loading's raise never runs: the o_proj of the head's one layer adds whatever memory torch.empty
    # was given. DEGRADED, not a warning: the head's every layer (it has one) computes with a bias it was never given,
    # and no acceptance can be promised for a head that does not compute what it was trained to.
    read, row, gate, raised = UNFILLED[release]
    result = audit(analysis(release), launch(tmp_path, {**HEAD, "bias": True}, "eagle3"))
    finding = contract(result, "vllm-drafter-contract")
    assert result.verdict == Verdict.DEGRADED and finding.status == Status.DEGRADES, finding.why
    assert "bias read (True) at vllm/model_executor/models/llama.py:" in finding.code and "never reads" not in finding.why
    assert "sets bias = True, which makes Eagle3LlamaForCausalLM build model.layers.*.self_attn.o_proj.bias from " \
           f"torch.empty (vllm/model_executor/layers/linear.py:{row})" in finding.why
    assert "qkv_proj.bias" not in finding.why  # the EAGLE-3 layer's own qkv_proj, built without one
    assert f"built as bias = True asks (vllm/model_executor/models/llama.py:{read})" in finding.code
    assert (finding.file, finding.line) == ("vllm/model_executor/model_loader/default_loader.py", gate)
    assert f"its raise at vllm/model_executor/model_loader/default_loader.py:{raised}) does not run" in finding.why
    assert "its load_weights returns None" in finding.why and "predicted acceptance: near zero but by chance" in finding.why
    # The head that ships its o_proj bias (under the name of its training, midlayer.*, which vLLM's LlamaModel maps to
    # layers.0.*) fills it: READY.
    shipped = audit(analysis(release), launch(tmp_path, {**HEAD, "bias": True}, "eagle3", None,
                                              {"midlayer.self_attn.o_proj.bias": np.zeros(32, np.float32)}))
    assert shipped.verdict == Verdict.READY and contract(shipped, "vllm-drafter-contract").status == Status.PASSES


@pytest.mark.parametrize("release, engine, rule_id", RELEASES[2:])
def test_sglang_passes_over_a_head_whose_names_it_does_not_build(tmp_path, release, engine, rule_id):
    # The head's tensors under its training wrapper's prefix (eagle_module.*): SGLang's load_weights finds none of them
    # in params_dict and loads nothing of the head's layers or fc; it runs with the values they were built with.
    wrapped = {f"eagle_module.{name}": value for name, value in
               {"fc.weight": np.zeros((64, 192), np.float32),
                "midlayer.mlp.gate_proj.weight": np.zeros((128, 64), np.float32),
                "midlayer.self_attn.q_proj.weight": np.zeros((64, 128), np.float32)}.items()}
    bare = {"fc.weight": None, "midlayer.mlp.gate_proj.weight": None, "midlayer.self_attn.q_proj.weight": None}
    result = audit(analysis(release), launch(tmp_path, HEAD, "eagle3", engine, {**bare, **wrapped}))
    assert result.verdict == Verdict.DEGRADED
    finding = degrading(result).get(rule_id) or contract(result, rule_id)
    assert finding.status == Status.DEGRADES and "the release loads none of eagle_module.fc.weight" in finding.why
    assert "which the model does not build" in finding.why and "predicted acceptance: near zero" in finding.why
    assert "if param_name in params_dict" in finding.code or finding.line > 0


@pytest.mark.parametrize("release", ["vllm==0.33.0", "vllm==0.34.0"])
def test_yuhuili_s_official_head_is_wholly_accounted_for_and_stays_ready(tmp_path, release):
    result = audit(analysis(release), yuhuili_head(tmp_path / "EAGLE3-LLaMA3.1-Instruct-8B", TRAINED))
    finding = contract(result, "vllm-drafter-contract")
    assert result.verdict == Verdict.READY and finding.status == Status.PASSES
    assert "(13 tensors" not in finding.why and "15 tensors" in finding.why  # 13 of f16, d2t, t2d


@pytest.mark.parametrize("release, argv", [
    ("vllm==0.33.0", ["vllm", "serve", "{target}", "--speculative-config",
                      '{{"method": "eagle3", "model": "{draft}", "num_speculative_tokens": 3}}']),
    ("sglang==0.5.23", ["python3", "-m", "sglang.launch_server", "--model-path", "{target}", "--speculative-algorithm",
                        "EAGLE3", "--speculative-draft-model-path", "{draft}", "--speculative-num-steps", "3"])])
def test_the_contract_is_judged_from_a_launch_command(tmp_path, release, argv):
    # Item 4: the target read from the command's --model / --model-path, the drafter from its speculative arguments.
    from specaudit.launch.command import parse_launch_command
    from specaudit.launch.request import launch_of

    given = launch(tmp_path, HEAD, "eagle3", None, {"input_norm.weight": np.ones(192, np.float32)})
    launched = launch_of(parse_launch_command([a.format(target=given.target.directory, draft=given.draft)
                                               for a in argv]))
    assert launched is not None
    rule_id = "sglang-drafter-contract" if release.startswith("sglang") else "vllm-drafter-contract"
    result = audit(analysis(release), launched)
    assert contract(result, rule_id).status == Status.WARNS and result.verdict == Verdict.READY


# -- vLLM's EAGLE-1 head ---------------------------------------------------------------------------------------------

# yuhuili/EAGLE-LLaMA3-Instruct-8B's config.json as vLLM reads it (a LlamaConfig; its one layer, fc over the token's
# embedding and the target's hidden state) and its tensors: layers.0.* without an input_layernorm (EAGLE-1's first
# layer has none), fc.weight [4096, 8192]; no lm_head and no embed_tokens (the target's are shared,
# llm_base_proposer.py _maybe_share_embeddings / _maybe_share_lm_head, has_own_* left False).
EAGLE1 = {"architectures": ["LlamaForCausalLM"], "bias": False, "hidden_act": "silu", "hidden_size": 4096,
          "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 32,
          "num_hidden_layers": 1, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
          "tie_word_embeddings": False, "torch_dtype": "float16", "vocab_size": 128256}
EAGLE1_TENSORS = {"fc.weight": [4096, 8192], "layers.0.self_attn.q_proj.weight": [4096, 4096],
                  "layers.0.self_attn.k_proj.weight": [1024, 4096], "layers.0.self_attn.v_proj.weight": [1024, 4096],
                  "layers.0.self_attn.o_proj.weight": [4096, 4096], "layers.0.mlp.gate_proj.weight": [14336, 4096],
                  "layers.0.mlp.up_proj.weight": [14336, 4096], "layers.0.mlp.down_proj.weight": [4096, 14336],
                  "layers.0.post_attention_layernorm.weight": [4096]}
# release -> the line of llama_eagle.py that hands map(transform, weights) to the loader, and of utils.py where
# AutoWeightsLoader.load_weights ignores an unexpected ".bias"
EAGLE1_RELEASES = {"vllm==0.26.0": (182, 405), "vllm==0.33.0": (196, 458), "vllm==0.34.0": (196, 469)}


def eagle1_head(directory, config: dict, extra: dict[str, list[int]] | None = None):
    """The EAGLE-1 head on Llama-3-8B-Instruct, f16 tensors of the real names and shapes, sparse (zeros)."""
    import json

    from specaudit.launch.checkpoint import read_checkpoint
    from specaudit.launch.request import Launch
    from specaudit.launch.target import load_preset

    from conftest import write_sparse_safetensors

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    tensors = {name: ("F16", shape, 2, None) for name, shape in {**EAGLE1_TENSORS, **(extra or {})}.items()}
    write_sparse_safetensors(directory / "model.safetensors", tensors)
    return Launch(load_preset("llama3"), method="eagle", draft=str(directory), drafter=read_checkpoint(str(directory)),
                  speculative={"method": "eagle", "model": str(directory), "num_speculative_tokens": 3})


@pytest.mark.parametrize("release", list(EAGLE1_RELEASES))
def test_an_eagle1_head_is_accounted_for_through_its_transform(tmp_path, release):
    result = audit(analysis(release), eagle1_head(tmp_path / "EAGLE-LLaMA3-Instruct-8B", EAGLE1))
    finding = contract(result, "vllm-drafter-contract")
    assert result.verdict == Verdict.READY and finding.status == Status.PASSES, finding.why
    assert finding.code.startswith("EagleLlamaForCausalLM (vllm/model_executor/models/llama_eagle.py): ")
    assert "(9 tensors, " in finding.why
    line = EAGLE1_RELEASES[release][0]
    for name in EAGLE1_TENSORS:  # transform: "model." + name, handed to the loader at that line
        assert f"{name} loaded into model.{name} at vllm/model_executor/models/llama_eagle.py:{line}" in finding.code
    # The config's bias (False) is read by llama.py's LlamaDecoderLayer.__init__ (the base of the head's layer);
    # logit_scale, which the head leaves out, by EagleLlamaForCausalLM.__init__ with its default 1.0.
    assert "bias read (False) at vllm/model_executor/models/llama.py:" in finding.code
    assert "logit_scale defaulted at vllm/model_executor/models/llama_eagle.py:" in finding.code


# A head trained with attention biases: their tensors (Llama-3-8B's widths: q 4096, k and v 1024, o 4096).
ATTENTION_BIASES = {f"layers.0.self_attn.{p}_proj.bias": [n] for p, n in (("q", 4096), ("k", 1024), ("v", 1024),
                                                                             ("o", 4096))}


@pytest.mark.parametrize("release", list(EAGLE1_RELEASES))
def test_an_eagle1_fc_bias_is_passed_over(tmp_path, release):
    # A head trained with EAGLE's default fc bias (cnets.py Model(bias=True)) and attention biases: its config says
    # bias true and its checkpoint carries fc.bias. vLLM builds fc without one and its loader ignores an unexpected
    # ".bias": the fc bias is never loaded, without a word. A partial loss: a warning with its figure, the launch
    # stays READY (the attention biases the bias key builds are filled: test_an_eagle1_bias_key_...).
    launched = eagle1_head(tmp_path / "EAGLE-fc-bias", {**EAGLE1, "bias": True}, {"fc.bias": [4096], **ATTENTION_BIASES})
    result = audit(analysis(release), launched)
    finding = contract(result, "vllm-drafter-contract")
    assert result.verdict == Verdict.READY and finding.status == Status.WARNS, finding.why
    assert "does not load fc.bias" in finding.why and "0.002% of the drafter's parameters not loaded" in finding.why
    loader_line = EAGLE1_RELEASES[release][1]
    assert f"fc.bias dropped (model.fc.bias: the model builds that layer with bias=False and the loader passes over " \
           f"an unexpected '.bias') at vllm/model_executor/models/utils.py:{loader_line}" in finding.code
    assert finding.file == "vllm/model_executor/models/utils.py" and finding.line == loader_line
    assert "fc.weight loaded into model.fc.weight" in finding.code and "unfilled" not in finding.code


@pytest.mark.parametrize("release", ["vllm==0.26.0", "vllm==0.33.0"])
def test_an_eagle1_bias_key_without_its_tensors_runs_on_uninitialised_biases(tmp_path, release):
    # The EAGLE-1 head trained without attention biases whose config says bias true: llama.py's LlamaDecoderLayer
    # reads it (0.26.0 :265, 0.33.0 :268) and builds qkv_proj (ColumnParallelLinear, linear.py 0.26.0 :488, 0.33.0
    # :547) and o_proj (RowParallelLinear, :1633 / :1757) with a bias from torch.empty. No tensor fills them, and
    # EagleLlamaForCausalLM.load_weights hands map(transform, weights) to the loader and returns nothing
    # (llama_eagle.py 0.26.0 :182, 0.33.0 :196): DefaultModelLoader.load_weights's weights tracking is off where
    # loaded_weights is None (default_loader.py 0.26.0 :436, 0.33.0 :512), so its raise (0.26.0 :467, 0.33.0 :569)
    # never runs. DEGRADED: both biases of the head's every layer (it has one) are whatever memory torch.empty was
    # given; the head computes attention it was never trained to, on every request.
    read, row, gate, raised = UNFILLED[release]
    column = {"vllm==0.26.0": 488, "vllm==0.33.0": 547}[release]
    result = audit(analysis(release), eagle1_head(tmp_path / "EAGLE-bias-key", {**EAGLE1, "bias": True}))
    finding = contract(result, "vllm-drafter-contract")
    assert result.verdict == Verdict.DEGRADED and finding.status == Status.DEGRADES, finding.why
    assert "sets bias = True, which makes EagleLlamaForCausalLM build model.layers.*.self_attn.qkv_proj.bias, " \
           f"model.layers.*.self_attn.o_proj.bias from torch.empty (vllm/model_executor/layers/linear.py:{column})" \
           in finding.why
    assert f"model.layers.*.self_attn.o_proj.bias unfilled (built as bias = True asks (vllm/model_executor/models/" \
           f"llama.py:{read}), from torch.empty) at vllm/model_executor/layers/linear.py:{row}" in finding.code
    assert (finding.file, finding.line) == ("vllm/model_executor/model_loader/default_loader.py", gate)
    assert f"default_loader.py:{raised}) does not run" in finding.why
    # Its biases shipped (q, k and v stacked into qkv_proj by LlamaModel's hf_to_vllm_mapper): filled, READY.
    shipped = audit(analysis(release), eagle1_head(tmp_path / "EAGLE-biases", {**EAGLE1, "bias": True},
                                                   ATTENTION_BIASES))
    assert shipped.verdict == Verdict.READY and contract(shipped, "vllm-drafter-contract").status == Status.PASSES
    # The key off (yuhuili's config: bias false): nothing built, READY (test_an_eagle1_head_is_accounted_for_...).


# release -> the line of utils.py where AutoWeightsLoader._load_module raises on a name that is neither a child module
# nor a parameter of the module it walks (`raise ValueError(msg)`)
EAGLE1_UNBUILT = {"vllm==0.26.0": 395, "vllm==0.33.0": 448, "vllm==0.34.0": 459}


@pytest.mark.parametrize("release", list(EAGLE1_UNBUILT))
def test_an_eagle1_head_shipping_its_own_lm_head_is_blocked_where_the_loader_raises(tmp_path, release):
    # The EAGLE-1 head with the lm_head of its training (Llama-3-8B's vocabulary x hidden): EagleLlamaForCausalLM
    # builds no lm_head (nn.Module.__init__, not LlamaForCausalLM's), transform hands the name over as it is, and the
    # loader raises on it. BLOCKED at the loader's raise, with the engine's message.
    launched = eagle1_head(tmp_path / "EAGLE-with-lm-head", EAGLE1, {"lm_head.weight": [128256, 4096]})
    result = audit(analysis(release), launched)
    finding = contract(result, "vllm-drafter-contract")
    assert result.verdict == Verdict.BLOCKED and finding.status == Status.BLOCKS, finding.why
    line = EAGLE1_UNBUILT[release]
    assert finding.file == "vllm/model_executor/models/utils.py" and finding.line == line
    assert finding.error == ("ValueError: There is no module or parameter named 'lm_head' in EagleLlamaForCausalLM. "
                             "The available parameters belonging to  (EagleLlamaForCausalLM) are: {desc_param_keys}")
    assert "EagleLlamaForCausalLM builds no module or parameter for lm_head.weight" in finding.why
    assert f"AutoWeightsLoader._load_module at vllm/model_executor/models/utils.py:{line}" in finding.why
    assert "lm_head.weight raises (ValueError: There is no module or parameter named 'lm_head'" in finding.code
    # The rest of the head is still accounted for as loaded, and the loader's other way out was played, not assumed:
    # a name it passes over is "dropped", never "raises" (test_an_eagle1_fc_bias_is_passed_over).
    assert "fc.weight loaded into model.fc.weight" in finding.code and finding.code.count(" raises (") == 1
    # An embedding, which the head's LlamaModel does build (model.embed_tokens), loads: the check is of what the
    # model builds, not of what a head usually ships.
    control = audit(analysis(release), eagle1_head(tmp_path / "EAGLE-with-embed", EAGLE1,
                                                   {"embed_tokens.weight": [128256, 4096]}))
    passed = contract(control, "vllm-drafter-contract")
    assert control.verdict == Verdict.READY and passed.status == Status.PASSES, passed.why
    assert "embed_tokens.weight loaded into model.embed_tokens.weight" in passed.code


# release -> the line of utils.py where AutoWeightsLoader adds its rotary parts to what it never loads (0.26.0
# __init__: `self.skip_substrs += self.ROTARY_EMBEDS_UNUSED_WEIGHTS`, read by _can_skip; 0.33.0 load_weights:
# `mapper |= self.REMOVE_UNUSED_ROTARY_EMBEDS_MAPPER`, orig_to_new_substr {"rotary_emb.inv_freq": None, ...})
ROTARY = {"vllm==0.26.0": (215, "ROTARY_EMBEDS_UNUSED_WEIGHTS"), "vllm==0.33.0": (471, "REMOVE_UNUSED_ROTARY_EMBEDS_MAPPER")}


@pytest.mark.parametrize("release", list(ROTARY))
def test_a_rotary_buffer_in_the_checkpoint_is_skipped_by_the_loader(tmp_path, release):
    # Checkpoints saved by older transformers carry each layer's rotary_emb.inv_freq buffer. vLLM computes its rotary
    # tables itself, and AutoWeightsLoader drops these names whatever the model builds: the tensor is skipped at the
    # loader's line, not loaded (it was shown as loaded into model.layers.0.self_attn.rotary_emb.inv_freq), and it is
    # no loss. Both load forms: EAGLE-1's transform and EAGLE-3's loop.
    line, constant = ROTARY[release]
    eagle1 = audit(analysis(release), eagle1_head(tmp_path / "EAGLE-rotary", EAGLE1,
                                                  {"layers.0.self_attn.rotary_emb.inv_freq": [64]}))
    eagle3 = audit(analysis(release), launch(tmp_path, HEAD, "eagle3", None,
                                             {"midlayer.self_attn.rotary_emb.inv_freq": np.zeros(4, np.float32)}))
    for result, name in ((eagle1, "layers.0.self_attn.rotary_emb.inv_freq"),
                         (eagle3, "midlayer.self_attn.rotary_emb.inv_freq")):
        finding = contract(result, "vllm-drafter-contract")
        assert result.verdict == Verdict.READY and finding.status == Status.PASSES, finding.why
        assert f"{name} skipped (model.{name}: the loader drops every name with 'rotary_emb.inv_freq' " \
               f"(AutoWeightsLoader.{constant}), whatever the model builds) at vllm/model_executor/models/utils.py:" \
               f"{line}" in finding.code
        assert f"{name} loaded" not in finding.code


@pytest.mark.parametrize("release", list(EAGLE1_UNBUILT)[:2])
def test_vllm_raises_on_an_eagle3_head_whose_names_it_does_not_build(tmp_path, release):
    # The head of test_sglang_passes_over_a_head_whose_names_it_does_not_build (its tensors under its training
    # wrapper's prefix, eagle_module.*) on vLLM: Eagle3LlamaForCausalLM.load_weights prefixes "model." to all but
    # lm_head (llama_eagle3.py 0.26.0 :405, 0.33.0 :444) and hands the rest to AutoWeightsLoader(self). "model" is
    # LlamaModel, whose load_weights builds its own AutoWeightsLoader(self) (0.26.0 llama_eagle3.py:268, 0.33.0
    # :302), and neither LlamaModel nor Eagle3LlamaForCausalLM builds an "eagle_module": both loaders fall to
    # _load_module's last else and raise (utils.py 0.26.0 :395, 0.33.0 :448), naming the module each walks. Where
    # SGLang passes the names over (DEGRADED), vLLM refuses the head: BLOCKED, per tensor.
    wrapped = {f"eagle_module.{name}": value for name, value in
               {"fc.weight": np.zeros((64, 192), np.float32), "lm_head.weight": np.zeros((100, 32), np.float32),
                "midlayer.self_attn.q_proj.weight": np.zeros((64, 128), np.float32)}.items()}
    bare = {"fc.weight": None, "lm_head.weight": None, "midlayer.self_attn.q_proj.weight": None}
    result = audit(analysis(release), launch(tmp_path, HEAD, "eagle3", None, {**bare, **wrapped}))
    finding = contract(result, "vllm-drafter-contract")
    assert result.verdict == Verdict.BLOCKED and finding.status == Status.BLOCKS, finding.why
    line = EAGLE1_UNBUILT[release]
    assert (finding.file, finding.line) == ("vllm/model_executor/models/utils.py", line)
    nested = "ValueError: There is no module or parameter named 'eagle_module' in LlamaModel. The available " \
             "parameters belonging to  (LlamaModel) are: {desc_param_keys}"
    top = "ValueError: There is no module or parameter named 'eagle_module' in Eagle3LlamaForCausalLM."
    assert f"eagle_module.fc.weight raises ({nested}) at vllm/model_executor/models/utils.py:{line}" in finding.code
    assert f"eagle_module.lm_head.weight raises ({top}" in finding.code  # kept without "model.": the drafter's loader
    assert finding.code.count(" raises (") == 3 and finding.error.startswith("ValueError: There is no module or ")
    # The same head under its own names loads (every tensor accounted for): the check is of what the model builds.
    plain = audit(analysis(release), launch(tmp_path, HEAD, "eagle3"))
    assert plain.verdict == Verdict.READY and contract(plain, "vllm-drafter-contract").status == Status.PASSES

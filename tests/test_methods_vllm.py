"""vLLM's methods other than EAGLE-3 and MTP, each through the method seam (rules/methods/vllm/): a launch the engine
accepts and the launches it refuses, on real release trees, at the engine's own line.

Facts from the releases' source (read, not run):
- vLLM 0.33.0 and 0.20.0 vllm/config/speculative.py: `prompt_lookup_max/min: int | None = Field(default=None, ge=1)`;
  __post_init__, for ngram: both None -> 5 and 5; one None -> the other's value; `prompt_lookup_min >
  prompt_lookup_max` -> ValueError "prompt_lookup_min=... must be <= prompt_lookup_max=..."; `num_speculative_tokens:
  int = Field(default=None, gt=0)`. _verify_args (a pydantic after-validator): `verify_equal_vocab_size_if_draft_model`
  unless use_heterogeneous_vocab (0.33.0) -> ValueError "Target and draft model should have the same vocabulary
  size"; _verify_and_get_draft_tp: a draft TP other than 1 or the target's -> ValueError.
- vLLM 0.33.0 vllm/v1/spec_decode/draft_model.py: DraftModelProposer.__init__ -> _raise_if_draft_tp_mismatch: the draft
  TP must equal the target's ("Currently, 'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same").
- vLLM 0.33.0 vllm/v1/spec_decode/ngram_proposer.py: NgramProposer (V1); vllm/v1/worker/gpu/spec_decode/ngram/
  speculator.py: NgramGPUSpeculator (V2, raises "ngram_gpu speculative decoding requires Triton." without Triton:
  the CPU platform takes V1 by VllmConfig.use_v2_model_runner).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from specaudit.core.types import Status, Verdict
from specaudit.launch.checkpoint import Checkpoint, TensorInfo
from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.scan.audit import Analysis, analyze, audit

from conftest import engine_analysis, engine_tree

analysis = engine_analysis  # one analysis of each release per session (conftest)


def launch(speculative: dict, preset: str = "llama3", drafter: Checkpoint | None = None, **options) -> Launch:
    method = str(speculative["method"]).lower() if speculative.get("method") else None
    return Launch(load_preset(preset), method=method, draft=speculative.get("model"), drafter=drafter,
                  speculative=speculative, options=options)


def blocking(result) -> list[tuple[str, int]]:
    return [(f.file, f.line) for f in result.blocking]


def causal_lm(path: str, vocab: int, hidden: int, layers: int, architecture: str = "LlamaForCausalLM",
              model_type: str = "llama") -> Checkpoint:
    """A draft model as the Hub ships one: its config's keys and its tensors' real names and shapes (no data)."""
    config = {"architectures": [architecture], "model_type": model_type, "hidden_size": hidden, "vocab_size": vocab,
              "num_hidden_layers": layers, "num_attention_heads": hidden // 64, "num_key_value_heads": 8,
              "intermediate_size": 4 * hidden, "max_position_embeddings": 131072, "tie_word_embeddings": True}
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    for i in range(layers):
        shapes |= {f"model.layers.{i}.self_attn.q_proj.weight": (hidden, hidden),
                   f"model.layers.{i}.mlp.down_proj.weight": (hidden, 4 * hidden)}
    file = f"{path}/model.safetensors"
    return Checkpoint(path, config, {name: TensorInfo(name, "BF16", shape, file, 0, 0) for name, shape in shapes.items()})


# Llama-3.2-1B-Instruct's keys (vocab 128256, as Llama-3.1-8B's), Qwen2.5-0.5B's (vocab 151936).
LLAMA_1B = causal_lm("/models/Llama-3.2-1B-Instruct", 128256, 2048, 2)
QWEN_05B = causal_lm("/models/Qwen2.5-0.5B-Instruct", 151936, 896, 2, "Qwen2ForCausalLM", "qwen2")


# -- ngram -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
@pytest.mark.parametrize("platform", ["cpu", "cuda"])
@pytest.mark.parametrize("speculative", [
    {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},  # min filled from max
    {"model": "ngram", "num_speculative_tokens": 3},  # the old spelling; both lookups default to 5
])
def test_an_ngram_launch_the_engine_accepts_is_ready(release, platform, speculative):
    result = audit(analysis(release, platform), launch(speculative))
    assert result.method.method == "ngram" and result.method.modeled
    assert result.verdict == Verdict.READY, blocking(result)
    # None of EAGLE-3's rules judge it.
    assert not any(f.rule_id.startswith("vllm-eagle3") for f in result.findings)


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
@pytest.mark.parametrize("speculative, error", [
    ({"method": "ngram", "prompt_lookup_min": 5, "prompt_lookup_max": 2, "num_speculative_tokens": 3},
     "prompt_lookup_min=5 must be <= prompt_lookup_max=2"),
    ({"method": "ngram", "prompt_lookup_max": 0, "num_speculative_tokens": 3}, "greater than or equal to 1"),
    ({"method": "ngram", "num_speculative_tokens": -3}, "greater than 0"),
    # `prompt_lookup_max: int | None`: pydantic's lax mode parses "4", not "x"
    ({"method": "ngram", "prompt_lookup_max": "x", "num_speculative_tokens": 3}, "valid integer"),
])
def test_an_ngram_launch_the_engine_refuses_is_blocked_at_its_line(release, speculative, error):
    result = audit(analysis(release, "cpu"), launch(speculative))
    assert result.verdict == Verdict.BLOCKED
    first = result.blocking[0]
    assert first.file == "vllm/config/speculative.py" and error in (first.error or ""), (first.rule_id, first.error)


def test_the_ngram_proposer_follows_the_runner_the_launch_takes():
    # On CUDA 0.33.0 an ngram launch of a dense Llama takes Model Runner V2 (its NgramGPUSpeculator), on CPU V1's
    # NgramProposer (Triton is missing): each path holds only its runner's roles.
    cuda = audit(analysis("vllm==0.33.0", "cuda"), launch({"method": "ngram", "num_speculative_tokens": 3}))
    cpu = audit(analysis("vllm==0.33.0", "cpu"), launch({"method": "ngram", "num_speculative_tokens": 3}))
    assert cuda.path.runner == "v2" and cpu.path.runner == "v1"
    assert not any("ngram_proposer.py" in f.file for f in cuda.findings)
    assert not any("spec_decode/ngram/speculator.py" in f.file for f in cpu.findings)


def test_the_speculative_config_s_fields_are_read_on_the_path_as_the_engine_leaves_them():
    # NgramProposer.__init__ asserts `prompt_lookup_min is not None`: __post_init__ filled it from the max, so the
    # assert is decided (it passes), never listed as undecided.
    result = audit(analysis("vllm==0.33.0", "cpu"), launch({"method": "ngram", "num_speculative_tokens": 3,
                                                            "prompt_lookup_max": 4}))
    assert not [f for f in result.findings if f.file == "vllm/v1/spec_decode/ngram_proposer.py" and f.line in (15, 16)]
    # The config's own raises that no way of this launch reaches are decided too: none is left undecided.
    assert not [f for f in result.findings if f.file == "vllm/config/speculative.py" and f.status == Status.UNDECIDED]


# vLLM 0.20.0 and 0.33.0 vllm/config/utils.py: `@config` makes SpeculativeConfig a pydantic dataclass with
# `ConfigDict(extra="forbid")`: a key it does not declare is refused before any of its code runs ("Extra inputs are
# not permitted"). 0.26.0 declares no dspark_draft_topk (0.33.0 does). 0.8.4's is a plain @dataclass (vllm/config.py).
@pytest.mark.parametrize("release, extra", [
    ("vllm==0.20.0", "num_speculative_token"),
    ("vllm==0.33.0", "num_speculative_token"),
    ("vllm==0.26.0", "dspark_draft_topk"),
])
def test_a_key_the_speculative_config_does_not_declare_is_refused_by_pydantic(release, extra):
    result = audit(analysis(release, "cpu"), launch({"method": "ngram", "num_speculative_tokens": 3, extra: 4}))
    assert result.verdict == Verdict.BLOCKED
    first = result.blocking[0]
    assert first.file == "vllm/config/speculative.py" and "class SpeculativeConfig" in first.code
    assert f"{extra}: Extra inputs are not permitted" in first.error


# vllm/engine/arg_utils.py, EngineArgs.create_speculative_config: 0.33.0 rewrites the JSON's keys
# (`{k.replace("-", "_"): v for k, v in self.speculative_config.items()}`) before building SpeculativeConfig; 0.20.0
# passes them as given, and pydantic refuses `num-speculative-tokens` as an extra input.
def test_a_dashed_key_is_the_field_where_the_release_rewrites_it_and_refused_where_it_does_not():
    dashed = {"method": "ngram", "num-speculative-tokens": 3, "prompt_lookup_max": 4}
    rewritten = audit(analysis("vllm==0.33.0", "cpu"), launch(dashed))
    assert rewritten.verdict == Verdict.READY, [f.title for f in rewritten.blocking]
    as_given = audit(analysis("vllm==0.20.0", "cpu"), launch(dashed))
    assert as_given.verdict == Verdict.BLOCKED
    assert "num-speculative-tokens: Extra inputs are not permitted" in as_given.blocking[0].error


# -- draft_model -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_same_vocabulary_draft_model_is_ready_and_no_eagle3_check_judges_it(release):
    result = audit(analysis(release, "cpu"), launch({"model": LLAMA_1B.path, "num_speculative_tokens": 3},
                                                    drafter=LLAMA_1B))
    assert result.method.method == "draft_model" and result.method.modeled
    assert result.verdict == Verdict.READY, blocking(result)
    assert not any(f.rule_id.startswith("vllm-eagle3") for f in result.findings)
    registered = next(f for f in result.findings if f.rule_id == "vllm-draft-architecture-registered")
    assert registered.status == Status.PASSES and "LlamaForCausalLM" in registered.why


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_draft_model_of_another_vocabulary_is_blocked_by_the_vocabulary_check(release):
    result = audit(analysis(release, "cpu"), launch({"model": QWEN_05B.path, "num_speculative_tokens": 3},
                                                    drafter=QWEN_05B))
    assert result.verdict == Verdict.BLOCKED
    first = result.blocking[0]
    assert first.file == "vllm/config/speculative.py"
    assert "same vocabulary size" in first.error and "151936" in first.error


def test_a_draft_model_of_an_unregistered_architecture_is_blocked_at_the_registry():
    mystery = replace(LLAMA_1B, config={**LLAMA_1B.config, "architectures": ["MysteryForCausalLM"]})
    result = audit(analysis("vllm==0.33.0", "cpu"), launch({"model": mystery.path, "num_speculative_tokens": 3},
                                                           drafter=mystery))
    assert [f.rule_id for f in result.blocking] == ["vllm-draft-architecture-registered"]


@pytest.mark.parametrize("draft_tp, target_tp, where", [
    (1, 2, "vllm/v1/spec_decode/draft_model.py"),  # accepted by the config, refused by DraftModelProposer
    (3, 2, "vllm/config/speculative.py"),  # neither 1 nor the target's: refused by _verify_and_get_draft_tp
])
def test_the_draft_s_tensor_parallel_size_is_held_against_the_target_s(draft_tp, target_tp, where):
    speculative = {"model": LLAMA_1B.path, "num_speculative_tokens": 3, "draft_tensor_parallel_size": draft_tp}
    result = audit(analysis("vllm==0.33.0", "cpu"),
                   launch(speculative, drafter=LLAMA_1B, **{"tensor-parallel-size": target_tp}))
    assert result.verdict == Verdict.BLOCKED and result.blocking[0].file == where
    same = audit(analysis("vllm==0.33.0", "cpu"), launch({**speculative, "draft_tensor_parallel_size": target_tp},
                                                         drafter=LLAMA_1B, **{"tensor-parallel-size": target_tp}))
    assert same.verdict == Verdict.READY, blocking(same)


# vLLM 0.33.0 SpeculativeConfig._verify_args: `if self.draft_model_config: self.draft_model_config.
# verify_with_parallel_config(self.draft_parallel_config)`, the draft's ParallelConfig built by
# create_draft_parallel_config with the draft TP; ModelConfig.verify_with_parallel_config (vllm/config/model.py):
# `total_num_attention_heads % tensor_parallel_size != 0` -> ValueError "Total number of attention heads (14) must be
# divisible by tensor parallel size (4)." (0.20.0 the same, in vllm/config/model.py). Qwen2.5-0.5B has 14 heads.
@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_draft_model_whose_heads_the_draft_tp_does_not_divide_is_blocked(release):
    qwen3 = {"model": QWEN_05B.path, "num_speculative_tokens": 3}
    result = audit(analysis(release, "cpu"), launch(qwen3, "qwen3", drafter=QWEN_05B, **{"tensor-parallel-size": 4}))
    assert result.verdict == Verdict.BLOCKED, result.verdict
    first = result.blocking[0]
    assert first.file == "vllm/config/model.py"
    assert "Total number of attention heads (14) must be divisible by tensor parallel size (4)" in first.error
    # TP 2 divides 14; a draft TP of 1 (the config allows 1 or the target's) too, on the config's side.
    for options, speculative in (({"tensor-parallel-size": 2}, qwen3),
                                 ({"tensor-parallel-size": 4}, {**qwen3, "draft_tensor_parallel_size": 1})):
        other = audit(analysis(release, "cpu"), launch(speculative, "qwen3", drafter=QWEN_05B, **options))
        assert not any(f.file == "vllm/config/model.py" for f in other.blocking), blocking(other)


# -- suffix ------------------------------------------------------------------------------------------------------
# vLLM 0.33.0 SpeculativeConfig._validate_suffix_decoding: `if not has_arctic_inference(): raise ImportError(...)`
# (vllm/utils/import_utils.py: find_spec("arctic_inference")), then the suffix_decoding_* values; the method runs on
# Model Runner V1 only (VllmConfig._get_v2_model_runner_unsupported_features lists it).

def environment(tmp_path, release: str, *installed: str):
    """A site-packages holding the release's package, as an installed vLLM is, and the modules named beside it."""
    site = tmp_path / "site-packages"
    site.mkdir()
    tree = engine_tree(release)
    for entry in tree.root.iterdir():
        (site / entry.name).symlink_to(entry)
    for module in installed:
        (site / module).mkdir()
        (site / module / "__init__.py").write_text("")
    from specaudit.tree.locate import locate

    return locate(str(site))


SUFFIX = {"method": "suffix", "num_speculative_tokens": 3}


def test_suffix_in_an_environment_without_arctic_inference_is_blocked_with_the_engine_s_import_error(tmp_path):
    result = audit(analyze(environment(tmp_path, "vllm==0.33.0"), platform="cuda"), launch(SUFFIX))
    assert result.verdict == Verdict.BLOCKED
    assert "Arctic Inference is required for suffix decoding" in result.blocking[0].error
    assert result.path.runner == "v1"  # V2 does not run suffix decoding: the engine falls back, and says so


def test_suffix_in_an_environment_with_arctic_inference_is_ready(tmp_path):
    result = audit(analyze(environment(tmp_path, "vllm==0.33.0", "arctic_inference"), platform="cuda"),
                   launch(SUFFIX))
    assert result.verdict == Verdict.READY, blocking(result)


def test_suffix_on_a_release_fetched_on_its_own_is_unknown_naming_the_package_it_needs():
    # Nothing is installed beside a fetched release: whether arctic-inference is there is the launch host's, which
    # the scan could not read. Never READY: UNKNOWN at the engine's check, with what it turns on.
    result = audit(analysis("vllm==0.33.0"), launch(SUFFIX))
    assert result.verdict == Verdict.UNKNOWN
    (needed,) = [f for f in result.findings if f.status == Status.UNKNOWN and "has_arctic_inference" in f.why]
    assert needed.file == "vllm/config/speculative.py" and "could not read" in needed.why


def test_suffix_s_own_values_are_checked():
    result = audit(analysis("vllm==0.33.0"), launch({**SUFFIX, "suffix_decoding_min_token_prob": 2}))
    assert result.verdict == Verdict.BLOCKED and "must be in [0, 1]" in result.blocking[0].error


# -- EAGLE-1 ---------------------------------------------------------------------------------------------------------
# vLLM 0.20.0 and 0.33.0: EAGLEConfig renames the drafter's architectures Eagle{arch}
# (vllm/transformers_utils/configs/eagle.py); registry.py registers EagleLlamaForCausalLM but no EagleQwen2ForCausalLM;
# llama_eagle.py builds `fc = ReplicatedLinear(input_size=self.config.hidden_size * 2, ...)`.

def eagle1(path: str, fc_inputs: int, architecture: str = "LlamaForCausalLM", hidden: int = 4096) -> Checkpoint:
    """yuhuili/EAGLE-LLaMA3-Instruct-8B's config keys and tensors: one decoder layer and fc."""
    config = {"architectures": [architecture], "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": 1,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
              "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0}
    shapes = {"fc.weight": (hidden, fc_inputs), "layers.0.self_attn.q_proj.weight": (hidden, hidden),
              "layers.0.mlp.down_proj.weight": (hidden, 14336), "layers.0.post_attention_layernorm.weight": (hidden,)}
    file = f"{path}/model.safetensors"
    return Checkpoint(path, config, {name: TensorInfo(name, "F16", shape, file, 0, 0) for name, shape in shapes.items()})


def eagle_launch(drafter: Checkpoint) -> Launch:
    # Served at the drafter's own 8192 positions: longer, 0.33.0 raises the draft's positions and warns of what the
    # longer requests lose (rules/vllm/degrades-draft-context.yaml), which is not what these tests are about.
    return launch({"method": "eagle", "model": drafter.path, "num_speculative_tokens": 3}, drafter=drafter,
                  **{"max-model-len": 8192})


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_an_eagle1_head_with_its_2x_fc_is_ready_and_no_eagle3_check_judges_it(release):
    result = audit(analysis(release, "cpu"), eagle_launch(eagle1("/d/EAGLE-LLaMA3-Instruct-8B", 2 * 4096)))
    assert result.method.method == "eagle" and result.method.modeled
    assert result.verdict == Verdict.READY, blocking(result)
    assert not any(f.rule_id.startswith("vllm-eagle3") for f in result.findings)
    fc = next(f for f in result.findings if f.rule_id == "vllm-eagle-drafter-fc-input-width")
    assert fc.status == Status.PASSES and "4096 x 2" in fc.why


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_an_eagle3_head_launched_as_eagle1_is_blocked_at_its_fc(release):
    result = audit(analysis(release, "cpu"), eagle_launch(eagle1("/d/eagle3-head", 3 * 4096)))
    assert [f.rule_id for f in result.blocking] == ["vllm-eagle-drafter-fc-input-width"]
    assert "Attempted to load weight" in result.blocking[0].error


def test_an_eagle1_head_of_an_architecture_the_release_has_no_eagle_class_for_is_blocked():
    result = audit(analysis("vllm==0.33.0", "cpu"),
                   eagle_launch(eagle1("/d/EAGLE-Qwen2-7B", 2 * 4096, architecture="Qwen2ForCausalLM")))
    registered = next(f for f in result.blocking if f.rule_id == "vllm-eagle-draft-architecture-registered")
    assert "EagleQwen2ForCausalLM" in registered.why


# -- extract_hidden_states -------------------------------------------------------------------------------------------
# vLLM 0.33.0 vllm/v1/spec_decode/extract_hidden_states.py, ExtractHiddenStatesProposer.__init__:
# `assert self.num_speculative_tokens == 1`; the layer ids from the draft config __post_init__ builds
# (ExtractHiddenStatesConfig: the speculative config's draft_model_config.hf_config over the target's), else
# ValueError "eagle_aux_hidden_state_layer_ids must be set in the draft model config for extract_hidden_states method".

def extract(k: int = 1, layer_ids: list[int] | None = None) -> dict:
    speculative: dict = {"method": "extract_hidden_states", "num_speculative_tokens": k}
    if layer_ids is not None:
        speculative["draft_model_config"] = {"hf_config": {"eagle_aux_hidden_state_layer_ids": layer_ids}}
    return speculative


def test_hidden_state_extraction_with_its_layer_ids_is_ready():
    result = audit(analysis("vllm==0.33.0", "cpu"), launch(extract(1, [1, 15, 28])))
    assert result.method.modeled and result.verdict == Verdict.READY, blocking(result)


@pytest.mark.parametrize("speculative, line, error", [
    (extract(1), 67, "eagle_aux_hidden_state_layer_ids must be set"),
    (extract(2, [1, 15, 28]), 35, "AssertionError"),
])
def test_hidden_state_extraction_the_proposer_refuses_is_blocked(speculative, line, error):
    result = audit(analysis("vllm==0.33.0", "cpu"), launch(speculative))
    first = result.blocking[0]
    assert (first.file, first.line) == ("vllm/v1/spec_decode/extract_hidden_states.py", line)
    assert error in first.error


# -- ngram on the GPU ------------------------------------------------------------------------------------------------
# vLLM 0.33.0: NgramProposerGPU on V1 (GPUModelRunner.__init__: use_ngram_gpu()), NgramGPUSpeculator on V2
# (init_speculator: use_ngram() is ngram or ngram_gpu); the lookup values are checked as ngram's.

@pytest.mark.parametrize("platform", ["cpu", "cuda"])
def test_ngram_on_the_gpu_is_judged_as_ngram_is(platform):
    ready = audit(analysis("vllm==0.33.0", platform), launch({"method": "ngram_gpu", "num_speculative_tokens": 3}))
    assert ready.method.modeled and ready.verdict == Verdict.READY, blocking(ready)
    refused = audit(analysis("vllm==0.33.0", platform), launch({"method": "ngram_gpu", "num_speculative_tokens": 3,
                                                                "prompt_lookup_min": 6, "prompt_lookup_max": 3}))
    assert refused.verdict == Verdict.BLOCKED and "must be <= prompt_lookup_max=3" in refused.blocking[0].error
    # What the engine's config code would check after it refuses the launch is not listed as undecided.
    assert not [f for f in refused.findings if f.status == Status.UNDECIDED and f.phase == "speculative_config"]


# -- metamorphic: a launch-value check written otherwise keeps its verdict ---------------------------------------------
# vLLM 0.33.0's ngram checks, rewritten in the file the scan reads (analyze's overlay; the tree on disk is untouched):
# `prompt_lookup_min > prompt_lookup_max` as an `if ...: raise` (as released), as an `assert`, moved into a method of
# the class, and into a helper of another module imported inside __post_init__; `prompt_lookup_max >= 1` as pydantic's
# Field(ge=1) (as released) and as a @field_validator.

SPECULATIVE = "vllm/config/speculative.py"
MIN_MAX_CHECK = '''            if self.prompt_lookup_min > self.prompt_lookup_max:
                raise ValueError(
                    f"prompt_lookup_min={self.prompt_lookup_min} must "
                    f"be <= prompt_lookup_max={self.prompt_lookup_max}"
                )
'''
FIELD = "    prompt_lookup_max: int | None = Field(default=None, ge=1)\n"
VALIDATOR = '''    @field_validator("prompt_lookup_max")
    @classmethod
    def _check_prompt_lookup_max(cls, value):
        if value is not None and value < 1:
            raise ValueError(f"prompt_lookup_max={value} must be >= 1")
        return value

    @model_validator(mode="after")
    def _verify_args(self) -> Self:'''
LOOKUPS_MODULE = '''def check_lookups(low, high):
    if low > high:
        raise ValueError(f"prompt_lookup_min={low} must be <= prompt_lookup_max={high}")
'''

REWRITES = {
    "as released": {},
    "assert": {SPECULATIVE: [(MIN_MAX_CHECK, "            assert self.prompt_lookup_min <= self.prompt_lookup_max, "
                                             "'prompt_lookup_min must be <= prompt_lookup_max'\n")]},
    "a method of the class": {SPECULATIVE: [
        (MIN_MAX_CHECK, "            self._check_lookups()\n"),
        ("    @model_validator(mode=\"after\")\n    def _verify_args(self) -> Self:",
         "    def _check_lookups(self):\n" + MIN_MAX_CHECK.replace("            ", "        ", 1)
         .replace("\n            ", "\n        ") + "\n    @model_validator(mode=\"after\")\n"
         "    def _verify_args(self) -> Self:")]},
    "a helper imported inside the function": {SPECULATIVE: [
        (MIN_MAX_CHECK, "            from vllm.config.utils import check_lookups\n\n"
                        "            check_lookups(self.prompt_lookup_min, self.prompt_lookup_max)\n")],
        "vllm/config/utils.py": [("\n\ndef ", "\n\n" + LOOKUPS_MODULE + "\n\ndef ")]},
    "a field validator": {SPECULATIVE: [(FIELD, "    prompt_lookup_max: int | None = None\n"),
                                        ("    @model_validator(mode=\"after\")\n    def _verify_args(self) -> Self:",
                                         VALIDATOR)]},
}
_rewritten: dict[str, Analysis] = {}


def rewritten(name: str) -> Analysis:
    if name not in _rewritten:
        tree = engine_tree("vllm==0.33.0")
        overlay: dict[str, bytes] = {}
        for relpath, edit in REWRITES[name].items():
            source = (tree.root / relpath).read_text()
            for old, new in edit:
                assert old in source, (name, old)
                source = source.replace(old, new, 1)
            overlay[relpath] = source.encode()
        _rewritten[name] = analyze(tree, overlay=overlay, platform="cpu")
    return _rewritten[name]


@pytest.mark.parametrize("name", list(REWRITES))
@pytest.mark.parametrize("speculative, verdict, min_max", [
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 5}, Verdict.READY,
     False),
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2}, Verdict.BLOCKED,
     True),
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 0}, Verdict.BLOCKED, False),
])
def test_a_launch_value_check_written_otherwise_keeps_its_verdict(name, speculative, verdict, min_max):
    result = audit(rewritten(name), launch(speculative))
    assert result.verdict == verdict, (name, blocking(result), [(f.rule_id, f.why) for f in result.findings][:3])
    if verdict == Verdict.BLOCKED:  # at the raise itself: the min/max check in the helper's module, where moved there
        moved = min_max and "helper" in name
        assert result.blocking[0].file == ("vllm/config/utils.py" if moved else SPECULATIVE)


def test_suffix_on_a_smoke_node_reads_the_modules_its_environment_lists():
    # smoke's preflight scans a local mirror of the node's engine, with the top-level modules the node's python lists
    # (smoke/remote_probe.py info: pkgutil.iter_modules): the mirror has nothing installed beside it.
    mirror = engine_tree("vllm==0.33.0")
    without = audit(analyze(replace(mirror, modules=frozenset({"torch", "numba"}))), launch(SUFFIX))
    assert without.verdict == Verdict.BLOCKED and "Arctic Inference" in without.blocking[0].error
    with_it = audit(analyze(replace(mirror, modules=frozenset({"torch", "arctic_inference"}))), launch(SUFFIX))
    assert with_it.verdict == Verdict.READY, blocking(with_it)

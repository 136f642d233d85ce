"""The model runner a vLLM launch takes, decided from the release's own VllmConfig.use_v2_model_runner
(specaudit/scan/runner.py), on real trees: vLLM 0.26.0 and 0.33.0 fetched from PyPI (cached)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specaudit.launch.command import parse_launch_command
from specaudit.launch.request import Launch
from specaudit.launch.target import load_model
from specaudit.scan.audit import analyze, audit, runner_decision
from specaudit.scan.runner import BOTH, LaunchFacts, RunnerChoice, Source, decide
from specaudit.scan.trace import load_path_spec

from conftest import vllm_tree

_analyses: dict = {}

# The tiny targets of the GPU grid (validation/gpu/grid_models.py): only what the choice reads matters, the
# architecture and, for MoE-ness, the expert count (ModelArchConfigConvertorBase.get_num_experts reads
# num_experts / moe_num_experts / n_routed_experts / num_local_experts of the text config).
COMMON = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 64, "intermediate_size": 512, "vocab_size": 512, "max_position_embeddings": 2048}
TARGETS = {
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
    "qwen3moe": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 4,
                 "num_experts_per_tok": 2, "moe_intermediate_size": 128},
    "qwen2moe": {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "num_experts": 4,
                 "num_experts_per_tok": 2, "moe_intermediate_size": 128},
    "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 256, "n_layer": 4},
    "gemma": {"architectures": ["GemmaForCausalLM"], "model_type": "gemma"},
    "llava": {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
              "text_config": {**COMMON, "architectures": ["LlamaForCausalLM"], "model_type": "llama"},
              "vision_config": {"model_type": "clip_vision_model", "hidden_size": 32, "image_size": 56,
                                "patch_size": 14}},
}


def _analysis(version: str, platform: str = "cuda"):
    key = (version, platform)
    if key not in _analyses:
        _analyses[key] = analyze(vllm_tree(version), platform=platform)
    return _analyses[key]


def _target(tmp_path: Path, name: str):
    path = tmp_path / f"target-{name}"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({**COMMON, **TARGETS[name]}))
    return load_model(str(path))


def _decided(tmp_path: Path, version: str, name: str, method: str = "eagle3", platform: str = "cuda",
             options: dict | None = None, speculative: dict | None = None):
    a = _analysis(version, platform)
    launch = Launch(_target(tmp_path, name), method=method, engine="vllm", options=options or {},
                    speculative=speculative or {"method": method, "num_speculative_tokens": 3})
    return runner_decision(a, load_path_spec("vllm").runner, launch, method)


# vLLM 0.26.0, vllm/config/vllm.py VllmConfig.use_v2_model_runner: VLLM_USE_V2_MODEL_RUNNER unset (envs.py: None),
# then dspark, dflash, diffusion, `if not self._is_default_v2_model_runner_model(): return False` (runner_type
# generate, not hybrid, not attention-free, an architecture of DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES or not MoE),
# `if not HAS_TRITON: return False`, then `_get_v2_model_runner_unsupported_features()`, else True.
@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3", "gpt2", "gemma", "llava"])
def test_0260_cuda_non_moe_targets_take_v2(tmp_path, name):
    decision = _decided(tmp_path, "0.26.0", name)
    assert decision.runner == "v2", decision.reason
    assert "vllm/config/vllm.py" in decision.reason and decision.reason.endswith(": v2")
    assert not decision.logged  # V2 taken without a fallback warning (the GPU logs say "Using V2 Model Runner")


def test_0260_cuda_moe_target_takes_v1_by_moe_ness(tmp_path):
    # Qwen3MoeForCausalLM is not in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES and is MoE: _is_default_v2_... is False,
    # `return False` without a log line (seen on the H200: no "Using V2 Model Runner" in qwen3moe--*.log).
    decision = _decided(tmp_path, "0.26.0", "qwen3moe")
    assert decision.runner == "v1", decision.reason
    assert "model_config.is_moe = True" in decision.reason
    assert "_is_default_v2_model_runner_model" in decision.reason
    assert not decision.logged


def test_0260_the_launch_commands_variable_takes_the_moe_target_to_v2(tmp_path):
    # use_v2_model_runner's first lines: `if envs.VLLM_USE_V2_MODEL_RUNNER is not None: return it` (envs.py:
    # maybe_convert_bool of os.getenv); the variable comes from the words before the program of the launch command.
    command = parse_launch_command(["VLLM_USE_V2_MODEL_RUNNER=1", "vllm", "serve", "/m", "--speculative-config",
                                    json.dumps({"method": "eagle3", "model": "/d", "num_speculative_tokens": 3})])
    assert command.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    launch = Launch(_target(tmp_path, "qwen3moe"), method="eagle3", engine="vllm", options=command.options,
                    speculative=command.speculative, env=command.env)
    decision = runner_decision(_analysis("0.26.0"), load_path_spec("vllm").runner, launch, "eagle3")
    assert decision.runner == "v2", decision.reason


def test_0260_cuda_moe_target_of_the_default_v2_architectures_takes_v2(tmp_path):
    # "Qwen2MoeForCausalLM" is one of DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (vllm/config/vllm.py, module level).
    assert _decided(tmp_path, "0.26.0", "qwen2moe").runner == "v2"


def test_0260_ngram_falls_back_to_v1_with_the_engines_warning(tmp_path):
    # _get_v2_model_runner_unsupported_features: `if speculative_config.method in ("ngram", "ngram_gpu")` appends
    # "ngram/ngram_gpu speculative decoding"; use_v2_model_runner logs it and returns False (the H200's
    # llama--ngram.log carries this very warning).
    decision = _decided(tmp_path, "0.26.0", "llama", method="ngram",
                        speculative={"method": "ngram", "num_speculative_tokens": 3})
    assert decision.runner == "v1"
    assert decision.logged == ("Model Runner V2 does not yet support ngram/ngram_gpu speculative decoding; using "
                               "the V1 model runner instead.",)


def test_0260_eagle3_with_pipeline_parallelism_falls_back_to_v1(tmp_path):
    # _get_v2_model_runner_unsupported_features: method == "eagle3" and pipeline_parallel_size > 1.
    decision = _decided(tmp_path, "0.26.0", "llama", options={"pipeline-parallel-size": "2"})
    assert decision.runner == "v1"
    assert "EAGLE3 with pipeline parallelism" in decision.logged[0]


def test_0260_cpu_has_no_triton_so_v1(tmp_path):
    # `if not HAS_TRITON: return False` with "Model Runner V2 requires Triton; using the V1 model runner instead."
    decision = _decided(tmp_path, "0.26.0", "llama", platform="cpu")
    assert decision.runner == "v1"
    assert decision.logged == ("Model Runner V2 requires Triton; using the V1 model runner instead.",)


# vLLM 0.33.0, VllmConfig.use_v2_model_runner: hisparse and watermark force V2, then the variable, then
# `if not HAS_TRITON and not current_platform.is_unspecified()`, then the unsupported features (suffix and
# custom_class, parallel drafting, heterogeneous vocab...): no architecture or MoE test any more.
@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3", "qwen3moe", "gpt2", "gemma", "llava"])
def test_0330_cuda_every_target_takes_v2(tmp_path, name):
    decision = _decided(tmp_path, "0.33.0", name)
    assert decision.runner == "v2", decision.reason


def test_0330_suffix_falls_back_to_v1(tmp_path):
    decision = _decided(tmp_path, "0.33.0", "llama", method="suffix",
                        speculative={"method": "suffix", "num_speculative_tokens": 3})
    assert decision.runner == "v1"
    assert "speculative method 'suffix'" in decision.logged[0]


def test_0330_ngram_stays_on_v2(tmp_path):
    # 0.33.0 dropped the ngram entry of the unsupported features (0.26.0 had it).
    decision = _decided(tmp_path, "0.33.0", "llama", method="ngram",
                        speculative={"method": "ngram", "num_speculative_tokens": 3})
    assert decision.runner == "v2"


def test_the_scan_traces_only_the_decided_runner(tmp_path):
    # GPT-2 on CUDA with 0.26.0 takes V2 (the H200's gpt2--*.log: "Using V2 Model Runner", then the crash in
    # vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py set_eagle3_aux_hidden_state_layers): the path has V2's
    # roles, none of V1's (gpu_model_runner.py), and says why.
    a = _analysis("0.26.0")
    result = audit(a, Launch(_target(tmp_path, "gpt2"), engine="vllm"))
    assert result.path.runner == "v2"
    assert "VllmConfig.use_v2_model_runner" in result.path.runner_reason
    assert not any(e.function and "gpu_model_runner:" in e.function for e in result.path.entries)
    assert any(e.function and "worker.gpu.model_runner:" in e.function for e in result.path.entries)
    # The traced path's own gates (path-*): V2's aux-layer setup, and nothing of V1's runner.
    traced = {f.file for f in result.findings if str(f.status.value) == "blocks" and f.rule_id.startswith("path-")}
    assert "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py" in traced
    assert "vllm/v1/worker/gpu_model_runner.py" not in traced


def _choice(**extra) -> RunnerChoice:
    return RunnerChoice("VAR", "pkg.envs", "v2", "v1", "pkg.config:Config.use_v2", "v2", "v1", **extra)


def _source(config: str, envs: str = 'import os\nVAR = os.getenv("VAR", None)\n'):
    import ast

    trees = {"pkg.config": (ast.parse(config), "pkg/config.py"), "pkg.envs": (ast.parse(envs), "pkg/envs.py")}
    return Source(trees.get)


CONFIG = '''
import pkg.envs as envs
class Config:
    @property
    def use_v2(self):
        if envs.VAR is not None:
            return envs.VAR
        if self.model_config.kind == "moe":
            logger.warning_once("MoE: %s", "V1")
            return False
        return True
'''


def test_a_condition_not_known_traces_both_and_says_what():
    decision = decide(_choice(reads=(("self.model_config", "__present__"),)), _source(CONFIG), LaunchFacts("eagle3"))
    assert decision.runner == BOTH
    assert "self.model_config.kind" in decision.reason and "both runners' paths are traced" in decision.reason


def test_a_known_condition_decides_and_keeps_the_engines_message():
    reads = (("self.model_config", "__present__"), ("self.model_config.kind", "__config__.get('kind')"))
    decision = decide(_choice(reads=reads), _source(CONFIG), LaunchFacts("eagle3", config={"kind": "moe"}))
    assert (decision.runner, decision.logged) == ("v1", ("MoE: V1",))
    assert decide(_choice(reads=reads), _source(CONFIG), LaunchFacts("eagle3", config={"kind": "dense"})).runner == "v2"


def test_the_variable_set_in_the_launch_wins():
    decision = decide(_choice(), _source(CONFIG), LaunchFacts("eagle3", env={"VAR": "1"}))
    assert decision.runner == "v2"


def test_a_release_without_the_choice_falls_back_to_the_variables_default():
    decision = decide(_choice(), _source("class Config:\n    pass\n", 'import os\nVAR = os.getenv("VAR", "0")\n'),
                      LaunchFacts("eagle3"))
    assert decision.runner == "v1" and "defaults to '0'" in decision.reason


# The choice's own shapes, played by play.player (forks on every condition not known, one way per end of a method
# of the class it calls): a list of unsupported features built by a method, an early return under nested ifs, a
# platform it has no names for.
SHAPES = '''
import pkg.envs as envs
class Config:
    @property
    def use_v2(self):
        if envs.VAR is not None:
            return envs.VAR
        if self.watermark_config is not None:
            logger.info_once("Watermarking requires V2")
            return True
        if self.model_config.kind == "moe":
            if self.model_config.experts > 8:
                return False
        if not HAS_TRITON and not current_platform.is_unspecified():
            return False
        unsupported = self._unsupported()
        if unsupported:
            logger.warning_once("V2 does not support %s", ", ".join(unsupported))
            return False
        return True

    def _unsupported(self):
        unsupported = []
        if self.speculative_config is not None and self.speculative_config.method in ("suffix",):
            unsupported.append(f"method {self.speculative_config.method!r}")
        if self.parallel_config.pp > 1:
            unsupported.append("pipeline parallelism")
        return unsupported
'''
SHAPE_READS = (("self.speculative_config", "__present__ if __method__ else None"),
               ("self.speculative_config.method", "__method__"), ("self.model_config", "__present__"),
               ("self.model_config.kind", "__config__.get('kind', 'dense')"),
               ("self.model_config.experts", "__config__.get('experts', 0)"),
               ("self.watermark_config", "__options__.get('watermark-config')"))
PP = ("self.parallel_config.pp", "int(__options__.get('pipeline-parallel-size', 1))")
CUDA = (("cuda", (("HAS_TRITON", True), ("current_platform.is_unspecified()", False))),)


def _shapes(facts: LaunchFacts, reads=SHAPE_READS + (PP,)):
    return decide(_choice(reads=reads, platforms=CUDA), _source(SHAPES), facts)


def test_a_method_that_builds_the_unsupported_features_decides_by_what_it_returns():
    decision = _shapes(LaunchFacts("suffix"))
    assert (decision.runner, decision.logged) == ("v1", ("V2 does not support method 'suffix'",))
    assert "`unsupported` is True" in decision.reason
    both = _shapes(LaunchFacts("suffix", options={"pipeline-parallel-size": "2"}))
    assert both.logged == ("V2 does not support method 'suffix', pipeline parallelism",)
    assert _shapes(LaunchFacts("eagle3")).runner == "v2"


def test_a_method_whose_ways_return_different_lists_gives_the_choice_one_way_for_each():
    # The path file does not say the parallel config: _unsupported() returns [] or ["pipeline parallelism"], so the
    # choice returns True on one way and False on the other, and says what it read that the path file does not give.
    decision = _shapes(LaunchFacts("eagle3"), reads=SHAPE_READS)
    assert decision.runner == BOTH
    assert "(return False, return True: reads self.parallel_config)" in decision.reason


def test_an_early_return_under_nested_ifs_names_both_conditions():
    decision = _shapes(LaunchFacts("eagle3", config={"kind": "moe", "experts": 16}))
    assert decision.runner == "v1"
    assert "`self.model_config.kind == 'moe'` is True" in decision.reason
    assert "`self.model_config.experts > 8` is True" in decision.reason
    assert "(with model_config.kind = 'moe', model_config.experts = 16)" in decision.reason
    assert _shapes(LaunchFacts("eagle3", config={"kind": "moe", "experts": 4})).runner == "v2"


def test_a_platform_the_path_file_names_nothing_for_says_what_is_not_known():
    # `not HAS_TRITON and not ...` is not known, though `not` and `and` give no reason of their own: the reason
    # names the first thing not known that the condition read.
    decision = _shapes(LaunchFacts("eagle3", platform="tpu"))
    assert decision.runner == BOTH
    assert "taken True: HAS_TRITON is not known" in decision.reason


def test_what_the_engine_says_at_info_level_where_it_overrides_the_variable_is_quoted():
    decision = _shapes(LaunchFacts("eagle3", options={"watermark-config": {"key": 1}}))
    assert (decision.runner, decision.logged) == ("v2", ("Watermarking requires V2",))
    assert decision.reason.endswith('the engine logs "Watermarking requires V2": v2')

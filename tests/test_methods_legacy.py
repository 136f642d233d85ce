"""vLLM's medusa, mlp_speculator and custom_class methods through the method seam (rules/methods/vllm/): a launch the
engine accepts and the launches it refuses, on real release trees, each with its verdict and the engine's own line.

Facts from the releases' source (read, not run):
- SpeculativeMethod lists medusa and mlp_speculator in 0.20.0 and 0.26.0 (vllm/config/speculative.py), not in 0.33.0;
  0.8.4 (vllm/config.py) declares no list and infers both from the draft's model_type in __post_init__, as the later
  releases do ("medusa", "mlp_speculator"). __post_init__ sets the draft config's num_lookahead_tokens to
  num_speculative_tokens: MedusaConfig's setter writes it to num_heads, MLPSpeculator reads it as its stage count
  (max_speculative_tokens). A num_speculative_tokens above n_predict must be a multiple of it (ValueError
  "num_speculative_tokens:4 must be divisible by n_predict=3"). 0.26.0 sets a Medusa draft's vocab_size to the
  target's (`draft_hf.vocab_size = target_vocab`).
- vllm/model_executor/models/registry.py: "MedusaModel" and "MLPSpeculatorPreTrainedModel" registered in 0.8.4; in
  0.20.0 and 0.26.0 MedusaModel is, and the MLPSpeculator line is a comment ("Temporarily disabled ... Re-enable this
  once the MLP Speculator is supported in V1"): the draft's ModelConfig refuses it, "Model architectures
  ['MLPSpeculatorPreTrainedModel'] are not supported for now".
- vllm/model_executor/models/medusa.py: blocks.{i}.layers.{j}.weight (hidden x hidden), lm_heads.{i}.weight (vocab x
  hidden); mlp_speculator.py: emb/proj/head/ln.{i}; DefaultModelLoader: "Following weights were not initialized from
  checkpoint". vllm/spec_decode/spec_decode_worker.py (0.8.4, V0): SpecDecodeWorker._vocab_size asserts the proposer's
  and the scorer's vocab sizes equal. V1 (0.20.0, 0.26.0): MedusaProposer (vllm/v1/spec_decode/medusa.py); no V1
  proposer for mlp_speculator (GPUModelRunner.__init__: "Unknown speculative decoding method").
- custom_class: 0.26.0 and 0.33.0 (vllm/v1/spec_decode/custom_class_proposer.py create_custom_proposer: ValueError
  "Invalid custom proposer module path" without a dot, ImportError "Cannot import module ...", AttributeError "Module
  ... has no attribute ...", then the class called with the VllmConfig and its propose checked); Model Runner V2
  does not run it (V1, with a warning); __post_init__: "method='custom_class' requires 'model' ...".
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from specaudit.core.types import Status, Verdict
from specaudit.launch.checkpoint import Checkpoint, TensorInfo
from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.scan.audit import analyze, audit

from conftest import engine_analysis, engine_tree

analysis = engine_analysis  # one analysis of each release per session (conftest)


def launch(speculative: dict, drafter: Checkpoint | None = None, preset: str = "llama3", **options) -> Launch:
    method = str(speculative["method"]).lower() if speculative.get("method") else None
    return Launch(load_preset(preset), method=method, draft=speculative.get("model"), drafter=drafter,
                  speculative=speculative, options=options)


def blocking(result) -> list[tuple[str, str, int, str | None]]:
    return [(f.rule_id, f.file, f.line, f.error) for f in result.blocking]


def checkpoint(path: str, config: dict, shapes: dict[str, tuple[int, ...]]) -> Checkpoint:
    file = f"{path}/model.safetensors"
    return Checkpoint(path, config, {n: TensorInfo(n, "BF16", s, file, 0, 0) for n, s in shapes.items()})


def medusa(heads: int = 4, hidden: int = 4096, vocab: int = 128256, path: str = "/d/medusa-llama3", **config):
    """A Medusa head as vLLM's MedusaModel loads it: num_heads blocks of one residual layer and as many lm heads."""
    shapes = {}
    for i in range(heads):
        shapes |= {f"blocks.{i}.layers.0.weight": (hidden, hidden), f"lm_heads.{i}.weight": (vocab, hidden)}
    return checkpoint(path, {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": hidden,
                             "vocab_size": vocab, "num_heads": heads, "num_hidden_layers": 1, **config}, shapes)


def mlp_speculator(n_predict: int = 3, emb: int = 4096, vocab: int = 128256, path: str = "/d/llama3-accelerator"):
    """An MLPSpeculator as ibm-ai-platform ships one: n_predict stages of emb, proj, head and ln."""
    shapes = {}
    for i in range(n_predict):
        shapes |= {f"emb.{i}.weight": (vocab, emb), f"proj.{i}.weight": (emb, emb), f"head.{i}.weight": (vocab, emb),
                   f"ln.{i}.weight": (emb,), f"ln.{i}.bias": (emb,)}
    return checkpoint(path, {"architectures": ["MLPSpeculatorPreTrainedModel"], "model_type": "mlp_speculator",
                             "emb_dim": emb, "inner_dim": 0, "n_predict": n_predict, "vocab_size": vocab,
                             "top_k_tokens_per_head": [4] * n_predict, "tie_weights": False}, shapes)


def spec(drafter: Checkpoint, k: int | None, method: str | None = None) -> dict:
    found = {"model": drafter.path} | ({"method": method} if method else {})
    return found | ({"num_speculative_tokens": k} if k is not None else {})


def finding(result, rule_id: str):
    return next(f for f in result.findings if f.rule_id == rule_id)


MEDUSA_RELEASES = ["vllm==0.8.4", "vllm==0.20.0", "vllm==0.26.0"]


# -- Medusa ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release", MEDUSA_RELEASES)
@pytest.mark.parametrize("method", ["medusa", None])  # named, or inferred from the draft's model_type
def test_a_medusa_head_trained_for_the_target_is_ready(release, method):
    result = audit(analysis(release), launch(spec(medusa(), 3, method), medusa()))
    assert result.method.method == "medusa" and result.method.modeled
    assert result.verdict == Verdict.READY, blocking(result)
    assert finding(result, "vllm-medusa-draft-architecture-registered").status == Status.PASSES
    heads = finding(result, "vllm-medusa-drafter-heads")
    assert heads.status == Status.PASSES and "3 head(s)" in heads.why  # one head per draft token, of the 4 it has
    assert not any(f.rule_id.startswith("vllm-eagle3") for f in result.findings)


@pytest.mark.parametrize("release", MEDUSA_RELEASES)
def test_more_draft_tokens_than_medusa_heads_fail_the_weight_load(release):
    result = audit(analysis(release), launch(spec(medusa(heads=4), 6, "medusa"), medusa(heads=4)))
    assert result.verdict == Verdict.BLOCKED
    (first, *_) = result.blocking
    assert first.rule_id == "vllm-medusa-drafter-heads"
    assert first.error.startswith("ValueError: Following weights were not initialized from checkpoint")
    assert "blocks.4.layers.0.weight" in first.error and "lm_heads.5.weight" in first.why


def test_missing_medusa_heads_of_a_quantized_draft_load_without_a_word():
    # default_loader.py (0.20.0) DefaultModelLoader.load_weights: "We only enable strict check for non-quantized
    # models": `if model_config.quantization is None and loaded_weights is not None: ... raise ValueError(...)`.
    result = audit(analysis("vllm==0.20.0"), launch({**spec(medusa(heads=4), 6, "medusa"), "quantization": "fp8"},
                                                    medusa(heads=4)))
    assert result.verdict == Verdict.DEGRADED, blocking(result)
    assert finding(result, "vllm-medusa-drafter-heads").status == Status.DEGRADES


@pytest.mark.parametrize("release", MEDUSA_RELEASES)
def test_a_medusa_head_of_another_hidden_size_fails_its_first_draft_step(release):
    wide = medusa(hidden=5120)
    result = audit(analysis(release), launch(spec(wide, 3, "medusa"), wide))
    assert [f.rule_id for f in result.blocking] == ["vllm-medusa-mlp-head-input-width"]
    assert "mat1 and mat2 shapes cannot be multiplied" in result.blocking[0].error


def test_a_medusa_head_of_another_vocabulary_on_0_8_4_is_refused_by_the_v0_worker():
    other = medusa(vocab=32000)
    result = audit(analysis("vllm==0.8.4"), launch(spec(other, 3, "medusa"), other))
    (first,) = result.blocking
    assert first.rule_id == "vllm-medusa-mlp-head-vocab" and first.error == "AssertionError"
    assert first.file == "vllm/spec_decode/spec_decode_worker.py"
    assert "assert all(vocab_sizes[0] == vocab_size" in (engine_tree("vllm==0.8.4").root / first.file) \
        .read_text().splitlines()[first.line - 1]


def test_a_medusa_head_of_another_vocabulary_on_0_26_0_fails_its_lm_heads_load():
    # 0.26.0 gives the draft the target's vocab_size: lm_heads of 128256 rows are built, the checkpoint's have 32000.
    other = medusa(vocab=32000)
    result = audit(analysis("vllm==0.26.0"), launch(spec(other, 3, "medusa"), other))
    (first,) = result.blocking
    assert first.rule_id == "vllm-medusa-drafter-heads" and first.error.startswith("AssertionError")
    assert "[32000, 4096]" in first.why and "[128256, 4096]" in first.why
    vocab = finding(result, "vllm-medusa-mlp-head-vocab")
    assert vocab.file == "vllm/config/speculative.py" and "vocab_size" in (
        engine_tree("vllm==0.26.0").root / vocab.file).read_text().splitlines()[vocab.line - 1]


def test_a_medusa_head_of_another_vocabulary_on_0_20_0_runs_and_does_not_help():
    # 0.20.0 compares no vocabulary for Medusa and builds the heads the checkpoint has: it loads, its ids are another
    # tokenizer's.
    other = medusa(vocab=32000)
    result = audit(analysis("vllm==0.20.0"), launch(spec(other, 3, "medusa"), other))
    assert result.verdict == Verdict.DEGRADED, blocking(result)
    assert finding(result, "vllm-medusa-mlp-head-vocab").status == Status.DEGRADES


def test_medusa_is_not_in_0_33_0_and_its_launch_is_blocked_by_the_method_list():
    result = audit(analysis("vllm==0.33.0"), launch(spec(medusa(), 3, "medusa"), medusa()))
    assert result.verdict == Verdict.BLOCKED and result.blocking[0].rule_id == "method-not-in-release"


# -- MLPSpeculator ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [None, 2, 3])  # none: n_predict (3), as __post_init__ defaults it
def test_an_mlp_speculator_on_0_8_4_is_ready_up_to_its_n_predict(k):
    result = audit(analysis("vllm==0.8.4"), launch(spec(mlp_speculator(), k), mlp_speculator()))
    assert result.method.method == "mlp_speculator" and result.method.modeled
    assert result.verdict == Verdict.READY, blocking(result)
    registered = finding(result, "vllm-mlp-speculator-draft-architecture-registered")
    assert registered.status == Status.PASSES and "MLPSpeculator" in registered.why


def test_an_mlp_speculator_draft_count_n_predict_does_not_divide_is_refused_by_the_config():
    result = audit(analysis("vllm==0.8.4"), launch(spec(mlp_speculator(), 4), mlp_speculator()))
    first = result.blocking[0]
    assert first.file == "vllm/config.py" and first.error == "ValueError: num_speculative_tokens:4 must be divisible " \
                                                             "by n_predict=3"


def test_an_mlp_speculator_with_a_multiple_of_its_stages_fails_the_weight_load():
    # 6 % 3 == 0 passes __post_init__; the model then builds 6 stages, the checkpoint has 3.
    result = audit(analysis("vllm==0.8.4"), launch(spec(mlp_speculator(), 6), mlp_speculator()))
    (first,) = result.blocking
    assert first.rule_id == "vllm-mlp-speculator-drafter-stages" and "emb.3.weight" in first.error
    assert first.error.startswith("ValueError: Following weights were not initialized from checkpoint")


def test_an_mlp_speculator_of_another_width_is_blocked():
    wide = mlp_speculator(emb=5120)
    result = audit(analysis("vllm==0.8.4"), launch(spec(wide, 3), wide))
    assert [f.rule_id for f in result.blocking] == ["vllm-medusa-mlp-head-input-width"]
    # proj.0 = nn.Linear(emb_dim, inner_dim) (mlp_speculator.py 0.8.4) meets the target's 4096-wide state
    assert result.blocking[0].error == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (Nx4096 and 5120x5120)"


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.26.0"])
@pytest.mark.parametrize("method", ["mlp_speculator", None])
def test_an_mlp_speculator_on_a_release_that_comments_its_class_out_of_the_registry_is_blocked(release, method):
    result = audit(analysis(release), launch(spec(mlp_speculator(), 3, method), mlp_speculator()))
    assert result.method.method == "mlp_speculator" and result.method.modeled
    assert result.verdict == Verdict.BLOCKED
    (first,) = result.blocking
    assert first.rule_id == "vllm-mlp-speculator-draft-architecture-registered"
    assert first.error.startswith("ValueError: Model architectures ['MLPSpeculatorPreTrainedModel'] are not supported")
    registry = (engine_tree(release).root / "vllm/model_executor/models/registry.py").read_text()
    assert '# "MLPSpeculatorPreTrainedModel"' in registry  # the line the release comments out
    assert first.file == "vllm/model_executor/models/registry.py"
    # What the registry refuses is not checked as if it were built.
    assert not any(f.rule_id == "vllm-mlp-speculator-drafter-stages" for f in result.findings)


# -- custom_class ----------------------------------------------------------------------------------------------------

CUSTOM = {"model": "my_pkg.proposers.MyProposer", "num_speculative_tokens": 3}
CUSTOM_RELEASES = ["vllm==0.26.0", "vllm==0.33.0"]
PROPOSER = "vllm/v1/spec_decode/custom_class_proposer.py"


def _line(release: str, finding) -> str:
    return (engine_tree(release).root / finding.file).read_text().splitlines()[finding.line - 1]


@pytest.mark.parametrize("release", CUSTOM_RELEASES)
@pytest.mark.parametrize("speculative", [CUSTOM, {**CUSTOM, "method": "custom_class"}])
def test_a_well_formed_custom_class_is_unknown_naming_the_class_it_imports(release, speculative):
    # Nothing of the launch's environment beside a fetched release: the import cannot be judged, and the class is the
    # user's code. Never READY; nothing blocks; the engine runs it on Model Runner V1.
    result = audit(analysis(release), launch(speculative))
    assert result.method.method == "custom_class" and result.method.modeled
    assert result.verdict == Verdict.UNKNOWN and not result.blocking
    assert result.path.runner == "v1"
    found = finding(result, "vllm-custom-class-proposer")
    assert found.status == Status.UNKNOWN and "'my_pkg.proposers'" in found.why and "MyProposer" in found.why
    assert found.file == PROPOSER and "raise ImportError(" in _line(release, found)


@pytest.mark.parametrize("release", CUSTOM_RELEASES)
def test_a_custom_class_path_without_a_dot_is_refused_by_the_proposer(release):
    result = audit(analysis(release), launch({"method": "custom_class", "model": "MyProposer",
                                              "num_speculative_tokens": 3}))
    assert result.verdict == Verdict.BLOCKED
    (first,) = result.blocking
    assert first.file == PROPOSER and "Invalid custom proposer module path" in first.error
    assert "raise ValueError(" in _line(release, first)


@pytest.mark.parametrize("release", CUSTOM_RELEASES)
def test_custom_class_without_a_model_is_refused_by_the_config(release):
    result = audit(analysis(release), launch({"method": "custom_class", "num_speculative_tokens": 3}))
    first = result.blocking[0]  # the proposer traced after it meets the model the refusal left unset: listed after
    assert first.rule_id == "method-resolution-raises" and first.file == "vllm/config/speculative.py"
    assert "method='custom_class' requires 'model'" in first.code


def test_custom_class_on_a_smoke_node_without_its_package_is_blocked_at_the_import():
    mirror = engine_tree("vllm==0.33.0")
    result = audit(analyze(replace(mirror, modules=frozenset({"torch", "numba"}))), launch(CUSTOM))
    (first,) = result.blocking
    assert first.rule_id == "vllm-custom-class-proposer" and first.file == PROPOSER
    assert first.error == "ImportError: Cannot import module 'my_pkg.proposers' for custom proposer " \
                          "'my_pkg.proposers.MyProposer': No module named 'my_pkg'"


def _environment(tmp_path, release: str, files: dict[str, str]):
    site = tmp_path / "site-packages"
    site.mkdir()
    for entry in engine_tree(release).root.iterdir():
        (site / entry.name).symlink_to(entry)
    for relpath, text in files.items():
        (site / relpath).parent.mkdir(parents=True, exist_ok=True)
        (site / relpath).write_text(text)
    from specaudit.tree.locate import locate

    return locate(str(site))


def test_custom_class_whose_module_lacks_the_class_is_blocked_at_the_getattr(tmp_path):
    tree = _environment(tmp_path, "vllm==0.26.0", {"my_pkg/__init__.py": "", "my_pkg/proposers.py":
                                                   "class OtherProposer:\n    pass\n"})
    result = audit(analyze(tree), launch(CUSTOM))
    (first,) = result.blocking
    assert first.rule_id == "vllm-custom-class-proposer" and "raise AttributeError(" in _line("vllm==0.26.0", first)
    assert first.error == "AttributeError: Module 'my_pkg.proposers' has no attribute 'MyProposer' " \
                          "(speculative_config.model='my_pkg.proposers.MyProposer')"


def test_custom_class_installed_with_its_class_is_still_unknown(tmp_path):
    tree = _environment(tmp_path, "vllm==0.26.0", {"my_pkg/__init__.py": "", "my_pkg/proposers.py":
                                                   "class MyProposer:\n    def __init__(self, vllm_config):\n"
                                                   "        pass\n\n    def propose(self, *args):\n        return []\n"})
    result = audit(analyze(tree), launch(CUSTOM))
    assert result.verdict == Verdict.UNKNOWN and not result.blocking
    found = finding(result, "vllm-custom-class-proposer")
    assert "installed beside the release and defines 'MyProposer'" in found.why

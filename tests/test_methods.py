"""The method seam: a launch's speculative method resolved as each release's own code resolves it, and no verdict
for a method specaudit does not model (UNKNOWN, never READY, never another method's checks).

Facts from the releases' source (read, not run):
- vLLM 0.33.0 vllm/config/speculative.py: `SpeculativeMethod = Literal["ngram", "draft_model", "suffix",
  "custom_class", EagleModelTypes, NgramGPUTypes, DSparkModelTypes]` (no medusa, no mlp_speculator); __post_init__:
  no method -> "custom_class" for a `pkg.Class` model (_is_custom_proposer_path), "ngram" for model "ngram", else
  "draft_model"; MTPModelTypes names other than "mtp" -> "mtp"; then, for a draft model, "eagle-" in its path ->
  "eagle", "eagle3" -> "eagle3", "dflash" -> "dflash"... .
- vLLM 0.20.0: the same chain, with medusa and mlp_speculator by the draft's model_type; `-sc` is --speculative-config.
- vLLM 0.8.4 vllm/config.py: `method: Optional[str]`, no list; a given model overwrites the method: "eagle-" in its
  path -> "eagle", medusa / mlp_speculator by model_type, else "draft_model"; no eagle3 anywhere.
- SGLang 0.4.4 srt/speculative/spec_info.py: `class SpeculativeAlgorithm(IntEnum): NONE, EAGLE`; server_args.py's
  __post_init__: `if self.speculative_algorithm == "NEXTN": self.speculative_algorithm = "EAGLE"`.
- SGLang 0.5.23: SpeculativeAlgorithm has DFLASH, UNO, DSPARK, EAGLE, EAGLE3, FROZEN_KV_MTP, STANDALONE, NGRAM, NONE;
  arg_groups/speculative_hook.py's _resolve_speculative_algorithm_alias returns "EAGLE" for NEXTN and EAGLE
  ("FROZEN_KV_MTP" for a Gemma-4 assistant draft); from_string raises "Unknown speculative algorithm name".
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from specaudit.core.types import Status, Verdict
from specaudit.launch.checkpoint import Checkpoint
from specaudit.launch.command import parse_launch_command
from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.methods.catalog import load_engine_methods, load_methods
from specaudit.methods.resolve import resolve
from specaudit.play.player import LiteralScope, Player
from specaudit.scan.audit import audit
from specaudit.scan.facts import ReleaseModules

from conftest import engine_analysis, engine_tree

analysis = engine_analysis  # one analysis of each release per session (conftest)


def launch(speculative: dict, preset: str = "llama3", drafter_config: dict | None = None, tmp_path=None) -> Launch:
    # Resolution reads the drafter's config.json only.
    drafter = Checkpoint(str(tmp_path), drafter_config, {}) if drafter_config is not None else None
    method = str(speculative["method"]).lower() if speculative.get("method") else None
    return Launch(load_preset(preset), method=method, draft=speculative.get("model"), drafter=drafter,
                  speculative=speculative)


def resolved(release: str, speculative: dict, **kwargs):
    a = analysis(release)
    return resolve(launch(speculative, **kwargs), ReleaseModules(a.index), a.engine_methods)


# -- resolution, as each release resolves it ---------------------------------------------------------------------

LLAMA_DRAFT = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256}


@pytest.mark.parametrize("release, speculative, method", [
    ("vllm==0.33.0", {"method": "eagle3", "model": "org/drafter", "num_speculative_tokens": 3}, "eagle3"),
    ("vllm==0.33.0", {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}, "eagle3"),
    ("vllm==0.33.0", {"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3}, "eagle"),
    ("vllm==0.33.0", {"model": "ngram", "num_speculative_tokens": 3}, "ngram"),
    ("vllm==0.33.0", {"model": "my_pkg.proposers.MyProposer", "num_speculative_tokens": 3}, "custom_class"),
    ("vllm==0.33.0", {"method": "deepseek_mtp", "num_speculative_tokens": 1}, "mtp"),
    ("vllm==0.33.0", {"method": "suffix", "num_speculative_tokens": 3}, "suffix"),
    ("vllm==0.20.0", {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}, "eagle3"),
    ("vllm==0.20.0", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}, "ngram"),
    ("vllm==0.8.4", {"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3}, "eagle"),
    ("vllm==0.8.4", {"method": "ngram", "num_speculative_tokens": 3}, "ngram"),
    ("sglang==0.5.23", {"method": "nextn"}, "eagle"),
    ("sglang==0.5.23", {"method": "EAGLE3", "model": "org/drafter"}, "eagle3"),
    ("sglang==0.5.23", {"method": "ngram"}, "ngram"),
    ("sglang==0.4.4", {"method": "nextn"}, "eagle"),
    # 0.5.8: server_args.py's _handle_speculative_decoding, a method __post_init__ calls, rewrites NEXTN to EAGLE.
    ("sglang==0.5.8", {"method": "nextn"}, "eagle"),
])
def test_the_method_is_the_one_the_release_resolves(release, speculative, method):
    assert resolved(release, speculative).method == method


def test_a_launch_naming_no_method_is_a_draft_model_where_the_drafter_says_nothing_else(tmp_path):
    # 0.33.0: no method -> "draft_model"; a Llama-3.2-1B draft matches none of the inference branches.
    found = resolved("vllm==0.33.0", {"model": str(tmp_path), "num_speculative_tokens": 3},
                     drafter_config=LLAMA_DRAFT, tmp_path=tmp_path)
    assert found.requested is None and found.method == "draft_model"
    assert any("self.method = 'draft_model'" in step for step in found.how)


def test_a_drafter_whose_config_is_not_here_leaves_the_method_open_and_says_on_what():
    # 0.33.0 infers dflash from the draft's architectures too ("MuseGlimmerAssistantModel"): unreadable, undecided.
    found = resolved("vllm==0.33.0", {"model": "org/some-draft", "num_speculative_tokens": 3})
    assert found.method is None and "MuseGlimmerAssistantModel" in found.problem


def test_the_release_lists_its_methods_where_it_declares_them():
    new = resolved("vllm==0.33.0", {"method": "eagle3", "model": "x", "num_speculative_tokens": 3})
    assert new.listed and new.listed_at.startswith("vllm/config/speculative.py:") and "mtp" in new.release_methods
    assert "medusa" not in new.release_methods and "dspark" in new.release_methods
    old = resolved("vllm==0.8.4", {"method": "ngram", "num_speculative_tokens": 3})
    assert not old.listed and {"eagle", "medusa", "draft_model", "ngram"} <= set(old.release_methods)
    assert set(resolved("sglang==0.4.4", {"method": "eagle"}).release_methods) == {"eagle", "none"}


# -- the verdict: a method the release lacks is BLOCKED, one specaudit does not model UNKNOWN ----------------------

EAGLE3_RULES = {"vllm": "vllm-eagle3", "sglang": "sglang-eagle3"}


# vLLM's eagle, draft_model, ngram, ngram_gpu, suffix and extract_hidden_states are modeled (tests/test_methods_vllm.py);
# medusa, mlp_speculator and custom_class too (tests/test_methods_legacy.py); dflash and dspark
# (tests/test_methods_dflash.py).
@pytest.mark.parametrize("release, speculative", [
    ("vllm==0.33.0", {"model": "org/plain-draft", "num_speculative_tokens": 3}),
    # SGLang's built-in algorithms are modeled (tests/test_methods_sglang.py); one a plugin registers is not.
    ("sglang==0.5.23", {"method": "my_plugin_spec", "model": "org/plugin-draft"}),
])
def test_a_method_specaudit_does_not_model_gets_no_verdict_and_no_eagle3_check(release, speculative):
    result = audit(analysis(release), launch(speculative))
    assert result.verdict == Verdict.UNKNOWN, [(f.rule_id, f.status) for f in result.findings]
    assert not result.method.modeled
    assert result.findings[0].rule_id in ("method-not-modeled", "method-resolution")
    assert not any(f.rule_id.startswith(EAGLE3_RULES[result.tree.engine]) or f.rule_id.startswith("path-")
                   for f in result.findings)


@pytest.mark.parametrize("release, method", [
    ("vllm==0.8.4", "eagle3"),  # no EAGLE-3 at all
    ("vllm==0.33.0", "medusa"),  # dropped from SpeculativeMethod
    ("sglang==0.4.4", "eagle3"),  # SpeculativeAlgorithm is NONE, EAGLE
    # A built-in of a later release (one specaudit models), on a release whose plugin API could register any other name
    # (SpeculativeAlgorithm.register): refused; a name no release has is a plugin's there (tests/test_methods_sglang.py).
    ("sglang==0.5.17", "uno"),
])
def test_a_method_the_release_does_not_have_is_blocked_quoting_its_list(release, method):
    result = audit(analysis(release), launch({"method": method, "model": "org/eagle3-drafter", "num_speculative_tokens": 3}))
    assert result.verdict == Verdict.BLOCKED
    (first,) = [f for f in result.blocking if f.rule_id == "method-not-in-release"]
    assert first is result.findings[0] and method in first.why and ", ".join(result.method.release_methods) in first.why


def test_eagle3_launches_keep_their_verdict_and_name_their_method():
    result = audit(analysis("vllm==0.33.0"), launch({"method": "eagle3", "model": "org/d", "num_speculative_tokens": 3}))
    assert result.verdict == Verdict.READY and result.method.method == "eagle3" and result.method.modeled
    assert result.landscape.method == "eagle3" and result.path.functions > 0
    # A scan given a target only audits an EAGLE-3 launch, as it always has.
    default = audit(analysis("vllm==0.33.0"), Launch(load_preset("kimi-k2.5")))
    assert default.method.requested == default.method.method == "eagle3" and default.method.modeled


def test_the_registry_gate_holds_for_every_method():
    # rules/vllm/registry-lookup.yaml names "*": an unregistered target blocks a launch of a method specaudit does not
    # model (DSpark, with its method file left out here) as it blocks any.
    from dataclasses import replace

    from specaudit.launch.target import Target

    target = Target("mystery", "test", {"architectures": ["MysteryForCausalLM"], "model_type": "mystery"})
    a = analysis("vllm==0.33.0")
    without = replace(a, methods={name: m for name, m in a.methods.items() if name != "dspark"}, _paths={})
    result = audit(without, Launch(target, method="dspark", speculative={"method": "dspark",
                                                                        "num_speculative_tokens": 3}))
    assert result.verdict == Verdict.BLOCKED
    assert [f.rule_id for f in result.blocking] == ["vllm-architecture-registered"]
    assert any(f.rule_id == "method-not-modeled" and f.status == Status.UNKNOWN for f in result.findings)


# -- the launch command's method flags --------------------------------------------------------------------------


def test_vllm_spec_flags_fill_the_speculative_config_and_sc_is_its_short_name():
    # vllm/engine/arg_utils.py (0.33.0): --spec-method/--spec-model/--spec-tokens; `-sc` for --speculative-config.
    command = parse_launch_command(["vllm", "serve", "m", "--spec-method", "ngram", "--spec-tokens", "3"])
    assert command.speculative == {"method": "ngram", "num_speculative_tokens": 3}
    command = parse_launch_command(["vllm", "serve", "m", "-sc", '{"method": "eagle3", "model": "d"}'])
    assert command.speculative == {"method": "eagle3", "model": "d"}
    from specaudit.core.errors import SpecauditError

    with pytest.raises(SpecauditError, match="mutually exclusive"):
        parse_launch_command(["vllm", "serve", "m", "-sc", '{"method": "eagle3"}', "--spec-method", "ngram"])


def test_sglang_names_its_algorithm_as_given_and_the_release_resolves_aliases():
    command = parse_launch_command(["python3", "-m", "sglang.launch_server", "--model-path", "m",
                                    "--speculative-algorithm", "NEXTN"])
    assert command.speculative["method"] == "nextn"


# -- the interpreter, code in and outcome out -------------------------------------------------------------------


def outcomes(source: str, method, bindings: dict | None = None, literals: dict | None = None):
    function = ast.parse(textwrap.dedent(source)).body[0]
    interpreter = Player("self.method", bindings or {}, LiteralScope(literals or {}), ("self.model",))
    return sorted({(o.method, o.raises is not None) for o in interpreter.run(function, method)}, key=str)


CHAIN = """
def __post_init__(self):
    if self.method is None:
        if self.model in ("ngram", "[ngram]"):
            self.method = "ngram"
        else:
            self.method = "draft_model"
    if self.method in get_args(MTPModelTypes) and self.method != "mtp":
        self.method = "mtp"
    if self.method in ("eagle", "eagle3"):
        pass
    elif "eagle3" in self.draft_model_config.model.lower():
        self.method = "eagle3"
    elif self.method == "draft_model":
        pass
    else:
        raise NotImplementedError(f"Unsupported speculative method: '{self.method}'")
"""


def test_the_interpreter_plays_the_chain_out_on_the_launch():
    literals = {"MTPModelTypes": {"deepseek_mtp", "mtp"}}
    assert outcomes(CHAIN, None, {"self.model": "ngram", "self.draft_model_config.model": "x"}, literals) == \
        [("ngram", True)]  # ngram is no draft model: the chain's else raises
    assert outcomes(CHAIN, None, {"self.model": "a/EAGLE3-x", "self.draft_model_config.model": "a/EAGLE3-x"},
                    literals) == [("eagle3", False)]
    assert outcomes(CHAIN, "deepseek_mtp", {"self.draft_model_config.model": "t"}, literals) == [("mtp", True)]


def test_an_unknown_condition_is_taken_both_ways():
    assert outcomes(CHAIN, None, {"self.model": "d"}, {"MTPModelTypes": {"mtp"}}) == [("draft_model", False),
                                                                                     ("eagle3", False)]


def test_the_same_chain_written_otherwise_resolves_the_same():
    # Metamorphic: `elif` as nested `else: if`, a condition through a local, `not` for `!=`.
    rewritten = """
    def __post_init__(self):
        if self.method is None:
            is_ngram = self.model in ("ngram", "[ngram]")
            if is_ngram:
                self.method = "ngram"
            else:
                self.method = "draft_model"
        if self.method in ("eagle", "eagle3"):
            pass
        else:
            if "eagle3" in self.draft_model_config.model.lower():
                self.method = "eagle3"
            elif not self.method == "draft_model":
                raise NotImplementedError("Unsupported speculative method")
    """
    for bindings in ({"self.model": "a/EAGLE3-x", "self.draft_model_config.model": "a/EAGLE3-x"},
                     {"self.model": "b/llama", "self.draft_model_config.model": "b/llama"}):
        assert outcomes(rewritten, None, bindings) == outcomes(CHAIN, None, bindings, {"MTPModelTypes": {"mtp"}})


def test_nothing_of_the_engine_is_run():
    # A call the interpreter does not know is unknown, whatever it would do.
    source = """
    def resolve(self):
        if __import__("os").system("touch /tmp/specaudit-ran"):
            self.method = "eagle"
    """
    assert outcomes(source, "eagle3") == [("eagle", False), ("eagle3", False)]
    assert not Path("/tmp/specaudit-ran").exists()


REWRITE = """
def hf_config_override(hf_config):
    if hf_config.model_type in ("deepseek_v3", "deepseek_v32"):
        hf_config.model_type = "deepseek_mtp"
    if hf_config.model_type == "deepseek_mtp":
        n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
        hf_config.update({"n_predict": n_predict, "architectures": ["DeepSeekMTPModel"]})
    if (arch := hf_config.architectures[0]) in ("MiMoForCausalLM",):
        hf_config.update({"architectures": [{"MiMoForCausalLM": "MiMoMTPModel"}[arch]]})
    return hf_config
"""
CHECKS = """
def __post_init__(self):
    n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
    try:
        int("x")
    except ValueError:
        pass
    if n_predict is not None and self.num_speculative_tokens % n_predict != 0:
        raise ValueError(f"num_speculative_tokens:{self.num_speculative_tokens} must be divisible by {n_predict=}")
"""


def test_the_interpreter_rewrites_a_config_object_as_the_engine_does():
    # Code in, outcome out: a config is a dict, its attributes its keys, rewritten in place.
    from specaudit.play.player import call

    function = ast.parse(textwrap.dedent(REWRITE)).body[0]
    for config, expected in [
        ({"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1},
         {"model_type": "deepseek_mtp", "architectures": ["DeepSeekMTPModel"], "n_predict": 1}),
        ({"model_type": "mimo", "architectures": ["MiMoForCausalLM"]}, {"architectures": ["MiMoMTPModel"]}),
        ({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, {"architectures": ["LlamaForCausalLM"]}),
    ]:
        (outcome,), _ = call(function, LiteralScope(), [config], {})
        assert expected.items() <= outcome.method.items()
    (outcome,), _ = call(function, LiteralScope(), [{"model_type": "x", "architectures": []}], {})
    assert outcome.error == "IndexError: list index out of range"  # as Python: architectures[0] of an empty list


def test_arithmetic_that_fails_on_the_launch_s_values_is_a_raise_with_python_s_message():
    function = ast.parse(textwrap.dedent(CHECKS)).body[0]

    def run(n_predict, k):
        interpreter = Player("self.method", {"self.draft_model_config.hf_config": {"n_predict": n_predict},
                                                  "self.num_speculative_tokens": k})
        return [(o.raises is not None, o.error) for o in interpreter.run(function, "mtp")]

    assert run(2, 4) == [(False, None)]
    assert run(2, 3) == [(True, "ValueError: num_speculative_tokens:3 must be divisible by n_predict=2")]
    assert run(0, 1) == [(True, "ZeroDivisionError: integer modulo by zero")]
    assert run(None, 3) == [(False, None)]  # the caught ValueError of the try does not end the way
    assert run(2, None) == [(True, "TypeError: unsupported operand type(s) for %: 'NoneType' and 'int'")]


def test_every_declared_method_file_loads():
    for engine in ("vllm", "sglang"):
        assert "eagle3" in load_methods(engine)
        assert load_engine_methods(engine).resolvers


@pytest.mark.parametrize("speculative, message", [
    # 0.33.0 __post_init__: with num_speculative_tokens and no model, `else: raise ValueError("num_speculative_tokens
    # was provided but without speculative model.")`; custom_class: "method='custom_class' requires 'model' ...".
    ({"method": "eagle3", "num_speculative_tokens": 3}, "num_speculative_tokens was provided but without speculative"),
    ({"method": "custom_class", "num_speculative_tokens": 3}, "method='custom_class' requires 'model'"),
])
def test_a_launch_the_resolving_code_refuses_on_every_way_is_blocked_there(speculative, message):
    # It was READY: the raise sits in the speculative config's validation, whose fields the path does not bind.
    result = audit(analysis("vllm==0.33.0"), launch(speculative))
    assert result.verdict == Verdict.BLOCKED
    first = result.blocking[0]  # custom_class's proposer, traced after it, meets the model the refusal left unset
    assert first.rule_id == "method-resolution-raises" and message in first.code
    assert first.file == "vllm/config/speculative.py" and first.line > 0


# -- the launch's own values are facts ------------------------------------------------------------------------------
# vllm/config/speculative.py (0.20.0, 0.33.0): `num_speculative_tokens: int = Field(default=None, gt=0)`,
# `prompt_lookup_max: int | None = Field(default=None, ge=1)` (pydantic validates them before __post_init__);
# __post_init__: `if self.prompt_lookup_min > self.prompt_lookup_max: raise ValueError(f"prompt_lookup_min=...
# must be <= prompt_lookup_max=...")`; _verify_args: `if self.num_speculative_tokens is None: raise ...`.
# 0.8.5 (vllm/config.py) declares no constraints and checks in code: "Expected num_speculative_tokens to be greater
# than zero", "prompt_lookup_min=0 must be > 0".

@pytest.mark.parametrize("release, speculative, error", [
    ("vllm==0.33.0", {"method": "eagle3", "model": "org/d", "num_speculative_tokens": -3},
     "num_speculative_tokens: Input should be greater than 0 (given -3)"),
    ("vllm==0.20.0", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 0},
     "prompt_lookup_max: Input should be greater than or equal to 1 (given 0)"),
    ("vllm==0.33.0", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2},
     "ValueError: prompt_lookup_min=5 must be <= prompt_lookup_max=2"),
    ("vllm==0.20.0", {"method": "ngram", "prompt_lookup_max": 4}, "ValueError: num_speculative_tokens must be provided"),
    ("vllm==0.8.5", {"method": "eagle", "model": "org/EAGLE-d", "num_speculative_tokens": -3},  # no eagle3 in 0.8.5
     "ValueError: Expected num_speculative_tokens to be greater than zero (-3)."),
    ("vllm==0.8.5", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 0},
     "ValueError: prompt_lookup_min=0 must be > 0"),
])
def test_a_launch_value_the_engine_refuses_is_blocked_with_its_words(release, speculative, error):
    result = audit(analysis(release), launch(speculative))
    assert result.verdict == Verdict.BLOCKED
    assert error in result.blocking[0].error


def test_mtp_on_a_target_with_no_mtp_rewrite_is_refused_where_the_engine_refuses_it():
    # vLLM 0.33.0 speculative.py: hf_config_override rewrites deepseek_v3 (not kimi_k2) to deepseek_mtp, so for
    # Kimi-K2 the draft's model type is no MTP type and __post_init__'s method chain ends in `raise
    # NotImplementedError(f"Unsupported speculative method: '{self.method}'")`. The Transformers-MTP branch before it
    # reads `target.hf_text_config.num_mtp_layers` only under `getattr(..., "num_mtp_layers", None) is not None`: the
    # refusal is the resolving code's, the only gate of the speculative config, not that read.
    result = audit(analysis("vllm==0.33.0"), launch({"method": "mtp", "num_speculative_tokens": 1}, preset="kimi-k2"))
    assert result.verdict == Verdict.BLOCKED
    assert [f.error for f in result.blocking[:1]] == ["NotImplementedError: Unsupported speculative method: 'mtp'"]
    assert not any("num_mtp_layers" in (f.error or "") for f in result.findings)


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_launch_values_the_engine_takes_are_not_refused(release):
    for speculative in ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
                        {"method": "eagle3", "model": "org/d", "num_speculative_tokens": 3}):
        assert resolved(release, speculative).stops is None, speculative


SPEC = "vllm/config/speculative.py"
FIELD = "    num_speculative_tokens: int = Field(default=None, gt=0)  # type: ignore[assignment]\n"
VERIFY = """        if self.num_speculative_tokens <= 0:
            raise ValueError(
                "Expected num_speculative_tokens to be greater "
                f"than zero ({self.num_speculative_tokens})."
            )
"""
CHECK_REFACTORS = {
    # The constraint dropped: _verify_args' own `if ...: raise` still refuses it.
    "no pydantic constraint": [(SPEC, FIELD, "    num_speculative_tokens: int = None  # type: ignore\n")],
    "the check as an assert, no constraint": [
        (SPEC, FIELD, "    num_speculative_tokens: int = None  # type: ignore\n"),
        (SPEC, VERIFY, "        assert self.num_speculative_tokens > 0, \"num_speculative_tokens must be > 0\"\n")],
    "the check in a method of its own, no constraint": [
        (SPEC, FIELD, "    num_speculative_tokens: int = None  # type: ignore\n"),
        (SPEC, VERIFY, "        self._check_token_count()\n"),
        (SPEC, "    @model_validator(mode=\"after\")\n    def _verify_args(self) -> Self:\n",
         "    def _check_token_count(self):\n"
         "        if not self.num_speculative_tokens > 0:\n"
         "            raise ValueError(\"num_speculative_tokens must be > 0\")\n\n"
         "    @model_validator(mode=\"after\")\n    def _verify_args(self) -> Self:\n")],
}


@pytest.mark.parametrize("name", sorted(CHECK_REFACTORS))
def test_a_launch_value_check_written_otherwise_keeps_the_verdict(name):
    from test_path_metamorphic import _overlay

    from specaudit.scan.audit import scan

    overlay = _overlay("vllm==0.33.0", CHECK_REFACTORS[name])
    tree = engine_tree("vllm==0.33.0")
    refused = scan(tree, launch({"method": "eagle3", "model": "org/d", "num_speculative_tokens": -3}), overlay=overlay)
    assert refused.verdict == Verdict.BLOCKED, [(f.rule_id, f.error) for f in refused.findings]
    taken = scan(tree, launch({"method": "eagle3", "model": "org/d", "num_speculative_tokens": 3}), overlay=overlay)
    assert not any(f.rule_id == "method-resolution-raises" for f in taken.findings)


def test_a_function_that_may_return_early_is_taken_both_ways():
    # SGLang 0.5.17 server_args.py: __post_init__ calls _handle_dwdp, which starts `if self.dwdp_size <= 1:
    # return` and then asserts `self.speculative_algorithm is None`; dwdp_size is not a launch fact. Going on past
    # the early return as if it were not there refused every EAGLE-3 launch.
    resolution = resolved("sglang==0.5.17", {"method": "EAGLE3", "model": "org/drafter"})
    assert resolution.method == "eagle3" and resolution.stops is None


@pytest.mark.parametrize("release,verdict", [("vllm==0.34.0", Verdict.UNKNOWN), ("vllm==0.33.0", Verdict.BLOCKED)])
def test_a_method_outside_vllm_s_list_is_a_plugin_s_where_the_release_lets_plugins_register(release, verdict):
    # 0.34.0 speculative.py SpeculativeConfig._validate_method: a method not in SpeculativeMethod passes where it is
    # in registered_speculative_methods(), which register_speculative_method (v1/worker/gpu/spec_decode/
    # speculator_config.py:317) fills from a general plugin at launch. 0.33.0 has no such API: pydantic refuses it.
    launch = Launch(load_preset("llama3"), method="my_plugin", speculative={"method": "my_plugin",
                                                                            "num_speculative_tokens": 3})
    result = audit(engine_analysis(release), launch)
    assert result.verdict == verdict
    (stop,) = [f for f in result.findings if f.status in (Status.BLOCKS, Status.UNKNOWN)]
    assert stop.rule_id == ("method-not-modeled" if verdict == Verdict.UNKNOWN else "method-not-in-release")
    assert ("register_speculative_method" in stop.why) == (verdict == Verdict.UNKNOWN)

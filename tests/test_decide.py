"""The tracer and decide (scan/trace.py, scan/decide.py), code in and verdict out: ``judged(code, launch)`` writes a
few lines of engine code where the path file's first role starts (vLLM's ``SpeculativeConfig.__post_init__``,
rules/paths/vllm.yaml), traces the method's path from there, and says how each gate of that code is decided for the
launch. The shapes are the releases' own (vLLM 0.17.0 speculative.py: the EAGLE-3 allowlist test on the target's
``hf_text_config.model_type``); the real trees are tests/test_vllm_facts.py's and test_path_metamorphic.py's."""

from __future__ import annotations

from typing import Any

import pytest

from specaudit.core.types import Status, Verdict
from specaudit.launch.request import Launch
from specaudit.launch.target import Target, load_preset
from specaudit.scan.audit import analyze, audit
from specaudit.tree.locate import locate

from conftest import engine_analysis

SPECULATIVE = "vllm/config/speculative.py"

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32}
GEMMA = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 2304, "num_hidden_layers": 26}


def judged(make_tree, code: str, config: dict[str, Any], method: str = "eagle3",
           files: dict[str, str] | None = None) -> list[tuple[int, Status]]:
    """The gates of ``code`` (vllm/config/speculative.py) on the traced path, as decided for a launch of ``method`` on a
    target of this config: (line, status) in the order the launch meets them, for those that stop it or that it cannot
    decide (a gate that passes is no finding). No rule file is loaded: the tracer finds the gates, decide judges them."""
    tree = locate(str(make_tree({SPECULATIVE: code, **(files or {})})))
    result = audit(analyze(tree, rules=[]), Launch(Target("target", "test", config), method=method))
    return [(f.line, f.status) for f in result.findings if f.file == SPECULATIVE or f.file in (files or {})]


ALLOWLIST = """
    class SpeculativeConfig:
        def __post_init__(self):
            aux_hidden_states_supported = ["llama", "qwen"]
            if self.method == "eagle3" and not any(
                supported in self.target_model_config.hf_text_config.model_type
                for supported in aux_hidden_states_supported
            ):
                raise ValueError("Eagle3 is only supported for llama and qwen models.")
"""


def test_a_gate_on_the_target_s_config_blocks_the_target_it_refuses_and_passes_the_one_it_takes(make_tree):
    assert judged(make_tree, ALLOWLIST, GEMMA) == [(9, Status.BLOCKS)]
    assert judged(make_tree, ALLOWLIST, LLAMA) == []


def test_a_gate_of_another_method_stops_nothing(make_tree):
    assert judged(make_tree, ALLOWLIST, GEMMA, method="eagle") == []


@pytest.mark.parametrize("form,code,files", [
    ("assert for if/raise", """
    class SpeculativeConfig:
        def __post_init__(self):
            aux_hidden_states_supported = ["llama", "qwen"]
            if self.method == "eagle3":
                assert any(
                    supported in self.target_model_config.hf_text_config.model_type
                    for supported in aux_hidden_states_supported
                ), "Eagle3 is only supported for llama and qwen models."
    """, {}),
    ("renamed, with the list a module constant", """
    AUX_SUPPORTED = ("llama", "qwen")

    class SpeculativeConfig:
        def __post_init__(self):
            model_type = self.target_model_config.hf_text_config.model_type
            if self.method == "eagle3" and not any(s in model_type for s in AUX_SUPPORTED):
                raise ValueError("Eagle3 is only supported for llama and qwen models.")
    """, {}),
    ("moved to a helper in another module", """
    from vllm.config.eagle_checks import check_eagle3_target

    class SpeculativeConfig:
        def __post_init__(self):
            if self.method == "eagle3":
                check_eagle3_target(self.target_model_config)
    """, {"vllm/config/eagle_checks.py": """
    def check_eagle3_target(model_config):
        if not any(s in model_config.hf_text_config.model_type for s in ("llama", "qwen")):
            raise ValueError("Eagle3 is only supported for llama and qwen models.")
    """}),
])
def test_the_same_gate_written_otherwise_keeps_its_verdict(make_tree, form, code, files):
    refused = judged(make_tree, code, GEMMA, files=files)
    taken = judged(make_tree, code, LLAMA, files=files)
    assert [status for _, status in refused] == [Status.BLOCKS], form
    assert taken == [], form


def test_a_gate_on_what_only_the_launch_knows_is_undecided_not_the_target_s(make_tree):
    code = """
    class SpeculativeConfig:
        def __post_init__(self):
            if self.method == "eagle3" and self.disable_padded_drafter_batch:
                raise ValueError("padded drafter batches are needed for EAGLE-3")
    """
    assert judged(make_tree, code, LLAMA) == [(5, Status.UNDECIDED)]


def test_the_speculative_config_s_own_checks_read_its_fields_not_a_method_of_it(make_tree):
    # vLLM 0.33.0 and 0.34.0 speculative.py: the model validator `_verify_args` that __post_init__'s object runs
    # refuses `self.tensor_parallel_size is not None`. Its `self` is the speculative config (the role's seed): a field
    # the launch leaves unset is not known, where it was once taken for an uncalled method, which is never None
    # (a false BLOCKED of every launch given no speculative config).
    code = """
    class SpeculativeConfig:
        def __post_init__(self):
            self._verify_args()

        def _verify_args(self):
            if self.tensor_parallel_size is not None:
                raise ValueError("'tensor_parallel_size' is not a valid argument in the speculative_config.")
    """
    assert judged(make_tree, code, LLAMA) == [(8, Status.UNDECIDED)]


def test_degraded_is_not_earned_where_a_stage_of_the_path_is_not_in_the_tree():
    # DEGRADED says the launch runs and the drafter cannot help; with a required stage of the path missing (vLLM
    # 0.34.0 deleted Model Runner V1's proposers), whether it runs is not known.
    from specaudit.core.types import Finding, Phase, Verdict
    from specaudit.scan.audit import _verdict

    def finding(rule_id: str, status: Status) -> Finding:
        return Finding(rule_id, rule_id, Phase.DRAFTER_LOAD, status, "vllm/x.py", 1, "", None, "", "")

    launch = Launch(Target("target", "test", LLAMA))
    degrades = finding("vllm-drafter-context", Status.DEGRADES)
    assert _verdict([degrades], launch) == Verdict.DEGRADED
    assert _verdict([degrades, finding("path-entry", Status.UNKNOWN)], launch) == Verdict.UNKNOWN
    assert _verdict([degrades, finding("path-entry", Status.UNKNOWN), finding("x", Status.BLOCKS)], launch) \
        == Verdict.BLOCKED


READS_A_KEY = """
    class SpeculativeConfig:
        def __post_init__(self):
            if {condition}:
                raise ValueError("the target's EAGLE layers are too many")
"""


@pytest.mark.parametrize("condition,verdict", [
    # A whole config.json without the key: Python raises AttributeError reading it (transformers' PretrainedConfig
    # holds the keys it is given as attributes). The read is a gate of its own (line 4: the target's config lacks
    # what the path reads), and the raise after it is met by failing on the way, evaluating its condition.
    ("self.method == 'eagle3' and self.target_model_config.hf_text_config.eagle_layers > 2",
     [(4, Status.BLOCKS), (5, Status.BLOCKS)]),
    # getattr with a default and hasattr do not fail there: the default decides, and the config has no such key.
    ("getattr(self.target_model_config.hf_text_config, 'eagle_layers', 0) > 2", []),
    ("hasattr(self.target_model_config.hf_text_config, 'eagle_layers')", []),
    ("getattr(self.target_model_config.hf_text_config, 'num_hidden_layers', 0) > 2", [(5, Status.BLOCKS)]),
])
def test_a_read_the_target_s_config_fails_on_is_a_raise_where_it_is_reached(make_tree, condition, verdict):
    assert judged(make_tree, READS_A_KEY.format(condition=condition), LLAMA) == verdict


@pytest.mark.parametrize("release,where", [
    ("vllm==0.34.0", "vllm/v1/worker/gpu/spec_decode/extract_hidden_states.py"),  # :37-45
    ("vllm==0.26.0", "vllm/v1/spec_decode/extract_hidden_states.py"),  # :70-74
])
def test_a_default_the_launch_s_own_value_makes_irrelevant_decides_nothing(release, where):
    # extract_hidden_states reads layer_ids = getattr(<the draft's hf_config>, "eagle_aux_hidden_state_layer_ids",
    # None) and raises `if not layer_ids`; the path file reads the launch's draft_model_config.hf_config first, with
    # the target's config as the default of a dict.get. Given [1, 2], the default is never the value, so a target
    # config that is a snapshot of some keys (kimi-k2) is READY as a whole config.json (llama3) is, not UNKNOWN.
    spec = {"method": "extract_hidden_states", "num_speculative_tokens": 1,
            "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}}}
    for preset in ("kimi-k2", "llama3"):
        result = audit(engine_analysis(release), Launch(load_preset(preset), method="extract_hidden_states",
                                                        engine="vllm", speculative=spec))
        assert not [f for f in result.findings if f.file == where and f.status in (Status.BLOCKS, Status.UNKNOWN)]
        assert result.verdict == Verdict.READY, preset


UNKNOWN_KEY = "self.draft_model_config.hf_config.foo"  # no drafter given: not known


@pytest.mark.parametrize("shape", [
    lambda n: UNKNOWN_KEY + '.replace("a", "aa")' * n,
    lambda n: UNKNOWN_KEY + "[0]" * n,
    lambda n: "(" * n + UNKNOWN_KEY + " == 1)" * n,
    lambda n: "(" * n + UNKNOWN_KEY + " or 0)" * n,
    lambda n: "getattr(" * n + UNKNOWN_KEY + ", 'x', None)" * n,
], ids=["method-chain", "subscripts", "comparisons", "or", "getattr"])
def test_a_condition_nested_deep_on_an_unknown_is_played_in_steps_that_grow_with_it(make_tree, expressions_played,
                                                                                    shape):
    # CI on 749c9b6: a 24-step `.replace()` chain on what was not known ran 410 s, each call playing its
    # receiver again to name its callee (2**steps). Each shape is undecided, in as many more steps per level.
    def counted(levels: int) -> int:
        expressions_played.clear()
        code = f"""
            class SpeculativeConfig:
                def __post_init__(self):
                    if self.method == "eagle3" and {shape(levels)} == "x":
                        raise ValueError("refused")
        """
        assert judged(make_tree, code, LLAMA) == [(5, Status.UNDECIDED)]
        return len(expressions_played)

    four, eight, twelve = counted(4), counted(8), counted(12)  # each once: a tree seen before is kept
    assert twelve - eight == eight - four

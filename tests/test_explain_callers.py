"""Fixes from a raise's callers (explain/callers.py, fixes.caller_fixes) and from a message the paste cut
(atlas.leading), issue 38: engine code in, a pasted line, the located raise and its fixes out."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from specaudit.explain.atlas import CUT
from specaudit.explain.atlas_build import load_atlas, merged_of, release_facts, release_of
from specaudit.explain.callers import Resolver, bind, call_of, link_callers, signature_of
from specaudit.explain.diagnose import located
from specaudit.explain.raise_sites import bare_line, locate
from specaudit.explain.signatures import explain_file
from specaudit.explain.templates import Call, Signature, file_facts
from specaudit.report.lines import located_lines

from conftest import engine_tree


def atlas_of(files: dict[str, str], engine: str = "vllm"):
    sources = {f"{engine}/{name}": textwrap.dedent(code).encode() for name, code in files.items()}
    return merged_of([release_of(engine, "1.0.0", sources)])


FLAGS = """
class EngineArgs:
    max_num_batched_tokens: int = 8192
    max_num_scheduled_tokens: int | None = None
    max_num_seqs: int = 256
"""

# The raise's own condition reads only its parameter; the caller calls it under a condition on a flag.
CHECKS = """
def check_steps(steps):
    if steps > 4:
        raise ValueError(f"too many draft steps for the tree kernel: {steps}")
"""

CALLER = """
from vllm.checks import check_steps

class SpeculativeConfig:
    method: str = "eagle"
    num_speculative_tokens: int = 1

    def __post_init__(self):
        if self.method == "eagle3":
            check_steps(self.num_speculative_tokens)
"""


def test_a_call_is_recorded_with_its_conditions_and_what_it_hands_on_and_a_function_with_its_parameters():
    facts = file_facts(textwrap.dedent(CALLER).encode())
    (call,) = [c for c in facts.calls if c.callee == "check_steps"]
    assert (call.function, call.receiver, call.args, call.way) == (
        "SpeculativeConfig.__post_init__", "", ("self.num_speculative_tokens",), (('self.method == "eagle3"', True),))
    assert file_facts(textwrap.dedent(CHECKS).encode()).defs["check_steps"] == Signature(("steps",))
    # a call under no condition that hands on no name or attribute carries nothing to a callee: not kept
    assert not file_facts(b"def f():\n    g(1, 'x')\n").calls


def test_a_call_binds_to_a_function_only_where_it_fits_its_parameters():
    method = Signature(("self", "architectures", "model_config"))
    call = Call("inspect", "C.f", 3, ".", ("archs", "cfg"), ())
    assert bind("R.inspect", method, call) == (("architectures", "archs"), ("model_config", "cfg"))
    assert bind("R.inspect", method, Call("inspect", "C.f", 3, "", ("archs", "cfg"), ())) is None  # a bare name
    assert bind("R.inspect", method, Call("inspect", "C.f", 3, ".", ("a", "b", "c"), ())) is None  # one too many
    assert bind("R.inspect", method, Call("inspect", "C.f", 3, ".", ("a",), (("other", "x"),))) is None
    assert bind("inspect", Signature(("x",), (), False, True), Call("inspect", "g", 1, "", ("a",), (("y", "b"),))) \
        == (("x", "a"),)  # **kwargs takes any keyword; only the named parameters are bound


def test_a_name_defined_in_many_places_is_linked_only_by_a_self_call_in_its_own_file():
    defs = {f"m{i}.py": {"C.run": Signature(("self", "n"))} for i in range(5)}
    calls = {"m0.py": [Call("run", "C.go", 9, "self", ("self.n",), ())],
             "other.py": [Call("run", "D.go", 4, ".", ("self.n",), ())]}
    linked = link_callers(defs, calls, [("m0.py", "C.run")])
    assert [(c.file, c.function) for c in linked[("m0.py", "C.run")]] == [("m0.py", "C.go")]


def test_the_conditions_a_caller_calls_a_raise_under_are_its_fix_where_the_raise_names_no_knob():
    atlas = atlas_of({"config/speculative.py": CALLER, "checks.py": CHECKS})
    found = locate(atlas, "too many draft steps for the tree kernel: 6")
    assert found is not None and found.sites[0].function == "check_steps"
    via = " [called by SpeculativeConfig.__post_init__ at vllm/config/speculative.py:10]"
    # the raise's own condition, its parameter put as the flag the caller hands it, turned round and solved on the
    # printed 6; the caller's condition further out (the method) only where these give none, as for a raise's own
    assert found.fixes == ('--speculative-config key "num_speculative_tokens": at most 4 (self.num_speculative_tokens '
                           "is 6 here)" + via, '--speculative-config key "num_speculative_tokens": 4 (the nearest to 6 '
                           "on which the conditions on the way do not all hold)" + via)


def test_the_callers_condition_is_the_fix_where_the_raise_and_what_it_is_handed_name_none():
    checks = """
    def check_tree_kernel():
        if not tree_kernel_built():
            raise RuntimeError("the tree attention kernel is not built for this GPU")
    """
    caller = CALLER.replace("check_steps(self.num_speculative_tokens)", "check_tree_kernel()")
    atlas = atlas_of({"config/speculative.py": caller.replace("check_steps", "check_tree_kernel"), "checks.py": checks})
    found = locate(atlas, "the tree attention kernel is not built for this GPU", exception="RuntimeError")
    assert found is not None
    assert found.fixes == ('--speculative-config key "method": other than \'eagle3\' [called by '
                           "SpeculativeConfig.__post_init__ at vllm/config/speculative.py:10]",)


def test_a_printed_value_a_caller_hands_down_from_a_checkpoint_key_is_that_keys_fix():
    registry = """
    class ModelRegistry:
        def _raise_for_unsupported(self, architectures):
            raise ValueError(f"Model architectures {architectures} are not supported for now. Supported: {self.names}")

        def resolve(self, architectures, model_config):
            return self._raise_for_unsupported(architectures)
    """
    loader = """
    def get_model_architecture(model_config):
        architectures = getattr(model_config.hf_config, "architectures", [])
        return model_config.registry.resolve(architectures, model_config)
    """
    atlas = atlas_of({"models/registry.py": registry, "loader.py": loader})
    found = locate(atlas, "Model architectures ['EagleLlamaModel'] are not supported for now. Supported: ['A']")
    assert found is not None
    assert found.fixes == ("`architectures` in the model's config.json: other than ['EagleLlamaModel'] (the message "
                           "printed it; no condition on the way names a knob) [called by ModelRegistry.resolve at "
                           "vllm/models/registry.py:7, called by get_model_architecture at vllm/loader.py:4]",)


def test_a_caller_that_calls_another_objects_method_lends_it_no_self():
    checks = """
    class Kernel:
        def check(self, n):
            if self.num_speculative_tokens > n:
                raise ValueError(f"the kernel cannot take {self.num_speculative_tokens} tokens a step, only {n}")
    """
    caller = """
    class SpeculativeConfig:
        num_speculative_tokens: int = 1

        def verify(self, kernel):
            kernel.check(self.max_model_len)
    """
    atlas = atlas_of({"kernel.py": checks, "config/speculative.py": caller})
    found = locate(atlas, "the kernel cannot take 5 tokens a step, only 3")
    assert found is not None and found.sites[0].function == "Kernel.check"
    # the kernel's self.num_speculative_tokens is not the SpeculativeConfig's: neither the condition nor the hole
    # that read it are read in the caller (whose max_model_len is no flag of this release either)
    assert found.fixes == ()


# A message the paste cut (atlas.leading).
SCHEDULER = """
class VllmConfig:
    def _set_max_num_scheduled_tokens(self):
        if self.speculative_config is not None:
            if self.scheduler_config.max_num_scheduled_tokens <= 0:
                raise ValueError(
                    "max_num_scheduled_tokens is set to"
                    f" {self.scheduler_config.max_num_scheduled_tokens} based on"
                    " the speculative decoding settings, which does not allow"
                    " any tokens to be scheduled. Increase max_num_batched_tokens"
                    " or decrease max_num_seqs."
                )
"""


def test_a_message_with_words_left_out_is_located_by_its_leading_part_with_the_fix_its_words_give():
    atlas = atlas_of({"engine/arg_utils.py": FLAGS, "config/vllm.py": SCHEDULER})
    line = "max_num_scheduled_tokens is set to -1792, which does not allow any tokens to be scheduled"
    found = locate(atlas, line)
    assert found is not None and found.sites[0].function == "VllmConfig._set_max_num_scheduled_tokens"
    assert found.holes == (("self.scheduler_config.max_num_scheduled_tokens", "-1792"),)
    # the message's own advice (the template's words, not the paste's: the paste cut them), beside the guard's fix
    assert found.fixes == ("--max-num-scheduled-tokens: above 0 (self.scheduler_config.max_num_scheduled_tokens is "
                           "-1792 here)", "--max-num-batched-tokens: as the message advises (the message advises it)",
                           "--max-num-seqs: as the message advises (the message advises it)")
    # and such a line with no exception type is read as the engine's raise
    assert bare_line(atlas)(line) == "ValueError"


def test_a_line_that_goes_on_with_words_the_template_lacks_is_not_its_cut():
    atlas = atlas_of({"engine/arg_utils.py": FLAGS, "config/vllm.py": SCHEDULER})
    assert locate(atlas, "max_num_scheduled_tokens is set to 4096, which is plenty for this workload") is None


def test_a_line_a_log_and_a_raise_both_begin_with_is_not_read_as_the_raise():
    logged = SCHEDULER.replace("            if self.scheduler_config.max_num_scheduled_tokens <= 0:", """\
            if self.scheduler_config.max_num_scheduled_tokens < 8192:
                logger.warning_once(
                    "max_num_scheduled_tokens is set to"
                    f" {self.scheduler_config.max_num_scheduled_tokens} based on"
                    " the speculative decoding settings. This may be slow."
                )
            if self.scheduler_config.max_num_scheduled_tokens <= 0:""")
    atlas = atlas_of({"engine/arg_utils.py": FLAGS, "config/vllm.py": logged})
    line = "max_num_scheduled_tokens is set to 4000 based on the"
    assert {h.entry.logged for h in atlas.lookup(line)} == {True, False}
    assert bare_line(atlas)(line) is None  # a healthy log's line, cut, as much as a failure's
    assert bare_line(atlas)("max_num_scheduled_tokens is set to -8, which does not allow any tokens") == "ValueError"


def test_a_cut_before_a_hole_the_conditions_read_says_the_fix_needs_it():
    code = """
    class SpeculativeConfig:
        num_speculative_tokens: int = 1

        def __post_init__(self):
            if self.num_speculative_tokens > self.n_predict:
                raise ValueError(
                    f"num_speculative_tokens:{self.num_speculative_tokens} is above what the draft model "
                    f"predicts per step, n_predict={self.n_predict}; lower it")
    """
    atlas = atlas_of({"config/speculative.py": code})
    found = locate(atlas, "num_speculative_tokens:5 is above what the draft mo")
    assert found is not None
    assert found.holes == (("self.num_speculative_tokens", "5"), ("self.n_predict", CUT))
    assert found.fixes[-1] == ("not from this paste: it cut the message before self.n_predict, which the conditions on "
                               "the way read (paste the whole message for the fix that needs its value)")


# The worked-on corpus (tests/fixtures/logs/public2, not held out), on real releases.
CORPUS = Path(__file__).parent / "fixtures" / "logs" / "public2"


def _corpus(log: str, releases: tuple[str, ...]):
    atlas = load_atlas([engine_tree(r) for r in releases])
    explanation = explain_file(str(CORPUS / log), None, bare_line(atlas))
    return explanation, located(explanation, atlas)


# vllm-0.14.0 vllm/model_executor/models/registry.py, _ModelRegistry._raise_for_unsupported: raised with no condition
# on the way; its message cut after "for now." in the paste. resolve_model_cls hands it its architectures, which
# model_loader/utils.py _get_model_architecture read as getattr(model_config.hf_config, "architectures", []).
def test_the_architectures_of_30987_cut_after_its_first_sentence_are_fixed_in_the_config_json():
    _, found = _corpus("vllm-30987-eagle3-architectures-missing-title.log", ("vllm==0.14.0",))
    assert found is not None and found.sites[0].function == "_ModelRegistry._raise_for_unsupported"
    assert found.holes == (("architectures", "['EagleLlamaModel']"), ("all_supported_archs", CUT))
    assert any(f.startswith("`architectures` in the model's config.json: other than ['EagleLlamaModel'] ") and
               f.endswith("[called by _ModelRegistry.resolve_model_cls at vllm/model_executor/models/registry.py:1061, "
                          "called by _get_model_architecture at vllm/model_executor/model_loader/utils.py:176]")
               for f in found.fixes), found.fixes


# vllm-0.20.0 and 0.32.0 vllm/config/vllm.py, VllmConfig._set_max_num_scheduled_tokens: "max_num_scheduled_tokens is
# set to {...} based on the speculative decoding settings, which does not allow ...", pasted without "based on the
# speculative decoding settings" and without its advice.
@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.32.0"])
def test_the_negative_token_budget_of_50708_pasted_with_words_left_out_is_located_with_its_fix(release):
    explanation, found = _corpus("vllm-50708-dflash-negative-scheduled-tokens.log", (release,))
    assert explanation.crash is not None and explanation.crash.exception == "ValueError"
    assert found is not None and found.sites[0].function == "VllmConfig._set_max_num_scheduled_tokens"
    assert found.holes == (("self.scheduler_config.max_num_scheduled_tokens", "-1792"),)
    # the advice the paste left out, from the template's words: beside the guard's --max-num-scheduled-tokens where
    # the release has that flag (0.32.0), alone where it does not (0.20.0: the message's words are the only fix)
    assert any(f.startswith("--max-num-batched-tokens: as the message ") for f in found.fixes), found.fixes


def _linked(requirement: str, by_imports: bool = True):
    """The callers of each raising function of a real release, linked through each module's imports (as the atlas
    links them) or, ``by_imports`` False, by the callee's name only (as format 7 did)."""
    files = release_facts(engine_tree(requirement))["files"]
    defs = {rel: {name: signature_of(row) for name, row in facts[3].items()} for rel, facts in files.items()}
    calls = {rel: [call_of(row) for row in facts[4]] for rel, facts in files.items()}
    wanted = dict.fromkeys((rel, row[2]) for rel, facts in files.items() for row in facts[1])
    imports = {rel: facts[5] for rel, facts in files.items()} if by_imports else None
    return files, link_callers(defs, calls, wanted, imports)


# vLLM 0.14.0 and 0.17.0 have two functions named rejection_sample: vllm/v1/sample/rejection_sampler.py:345 (0.17.0:
# :350), which asserts (`assert draft_token_ids.ndim == 1`, :361 / :366), and
# vllm/v1/worker/gpu/spec_decode/rejection_sample.py:41. The new runner, vllm/v1/worker/gpu/model_runner.py, imports
# the second (`from vllm.v1.worker.gpu.spec_decode.rejection_sample import rejection_sample`, :56 / :89) and calls it
# in GPUModelRunner.sample (:640 / :790): no caller of the first. And `main`, defined in 14 modules of 0.14.0, is
# linked where a module imports it: vllm/entrypoints/cli/benchmark/latency.py:5 `from vllm.benchmarks.latency import
# add_cli_args, main`, called at :21 in BenchmarkLatencySubcommand.cmd, is a caller of vllm/benchmarks/latency.py:80
# main (which asserts at :89).
@pytest.mark.parametrize("release, line", [("vllm==0.14.0", 640), ("vllm==0.17.0", 790)])
def test_a_call_is_linked_to_the_function_its_module_imports_not_to_another_of_its_name(release, line):
    files, linked = _linked(release)
    runner = "vllm/v1/worker/gpu/model_runner.py"
    assert files[runner][5]["rejection_sample"] == "vllm.v1.worker.gpu.spec_decode.rejection_sample.rejection_sample"
    key = ("vllm/v1/sample/rejection_sampler.py", "rejection_sample")
    sample = (runner, "GPUModelRunner.sample", line)
    assert sample not in {(c.file, c.function, c.line) for c in linked.get(key, ())}
    _, by_name = _linked(release, by_imports=False)
    assert sample in {(c.file, c.function, c.line) for c in by_name[key]}  # what linking by name confused
    benchmark = ("vllm/entrypoints/cli/benchmark/latency.py", "BenchmarkLatencySubcommand.cmd", 21)
    assert benchmark in {(c.file, c.function, c.line) for c in linked[("vllm/benchmarks/latency.py", "main")]}
    assert benchmark not in {(c.file, c.function, c.line) for c in by_name.get(("vllm/benchmarks/latency.py", "main"), ())}


def test_a_call_is_resolved_through_a_package_s_re_export_and_star_import_and_left_to_its_name_where_it_cannot_be():
    defs = {"e/pkg/__init__.py": {}, "e/pkg/state.py": {"init_env": Signature(("n",)), "Check.run": Signature(
        ("self", "n"))}, "e/other.py": {"init_env": Signature(("n",))}, "e/user.py": {"go": Signature(("n",))}}
    imports = {"e/pkg/__init__.py": {"*1": ".state"}, "e/user.py": {"init_env": "e.pkg.init_env", "Check": "e.pkg.state.Check",
                                                                    "torch": "torch"}}
    resolver = Resolver(defs, imports)
    call = Call("init_env", "go", 3, "", ("n",), ())
    assert resolver.callee("e/user.py", call) == ("e/pkg/state.py", "init_env")  # the star import's
    assert resolver.callee("e/user.py", Call("run", "go", 4, ".", ("n",), (), owner="Check")) == ("e/pkg/state.py",
                                                                                                  "Check.run")
    assert resolver.callee("e/user.py", Call("f", "go", 5, ".", ("n",), (), owner="torch.ops")) == ("", "")  # outside
    assert resolver.callee("e/user.py", Call("run", "go", 6, ".", ("n",), (), owner="local")) is None  # by name
    linked = link_callers(defs, {"e/user.py": [call]}, [("e/pkg/state.py", "init_env"), ("e/other.py", "init_env")],
                          imports)
    assert list(linked) == [("e/pkg/state.py", "init_env")]


def test_a_site_reports_its_message_and_a_cut_message_its_holes_with_no_guard_to_show_them_in():
    code = """
    def draft_vocab(draft_vocab_size, target_vocab_size):
        raise ValueError(
            f"the draft vocabulary has {draft_vocab_size} tokens, more than the target's; truncate it to "
            f"{target_vocab_size} tokens or retrain the head")
    """
    atlas = atlas_of({"spec_decode/vocab.py": code})
    found = locate(atlas, "the draft vocabulary has 151936 tokens, more than the target's; trunc")
    assert found is not None and found.sites[0].guard == ""
    assert found.sites[0].message == ("the draft vocabulary has {draft_vocab_size} tokens, more than the target's; "
                                      "truncate it to {target_vocab_size} tokens or retrain the head")
    lines = located_lines(found)
    assert f"message there: {found.sites[0].message}" in lines
    assert f"its holes: draft_vocab_size = 151936, target_vocab_size = {CUT}" in lines

"""SGLang's speculative algorithms through the method seam: each judged by its own handler's checks, its own worker's
path and its own drafter checks, never by another algorithm's (issue 24, SGLang half).

Facts from the releases' source (read, not run):
- 0.5.23 speculative/spec_info.py SpeculativeAlgorithm.handle_server_args dispatches per algorithm: `if
  self.is_dflash(): _handle_dflash(...) elif self.is_uno(): _handle_uno(...) ... elif self.is_eagle() or
  self.is_standalone(): _handle_eagle_family(...) elif self.is_ngram(): _handle_ngram(...)` (the handlers in
  arg_groups/speculative_hook.py); create_worker picks NGRAMWorker, StandaloneWorkerV2, DFlashWorkerV2, UnoWorkerV2.
- 0.5.8 server_args.py ServerArgs._handle_speculative_decoding holds every algorithm's checks under `if
  self.speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):` and `if self.speculative_algorithm == "NGRAM":`.
- 0.5.17 has DFLASH (no UNO); 0.5.8 has EAGLE, EAGLE3, STANDALONE, NGRAM; UNO is only in 0.5.23 of the releases here.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from specaudit.core.types import Status, Verdict
from specaudit.launch.checkpoint import Checkpoint
from specaudit.launch.command import parse_launch_command
from specaudit.launch.request import Launch, method_of
from specaudit.launch.target import load_preset
from specaudit.scan.audit import audit

from conftest import engine_analysis

pytestmark = pytest.mark.network

analysis = engine_analysis  # one analysis of each release per session (conftest)


HOOK = "sglang/srt/arg_groups/speculative_hook.py"
SERVER_ARGS = "sglang/srt/server_args.py"
LLAMA_DRAFT = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256}  # Llama-3.2-1B
QWEN_DRAFT = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936}  # Qwen2.5-0.5B


def launch(arguments: str, preset: str = "llama3", drafter: dict | None = None) -> Launch:
    """A launch as `python -m sglang.launch_server --model-path <target> ARGUMENTS` reads it; ``drafter``: the
    config.json of the draft the command names."""
    command = parse_launch_command(shlex.split(f"python -m sglang.launch_server --model-path t {arguments}"))
    speculative = command.speculative
    checkpoint = Checkpoint(speculative["model"], drafter, {}) if drafter is not None else None
    return Launch(load_preset(preset), method=method_of(speculative), engine="sglang", draft=speculative.get("model"),
                  drafter=checkpoint, speculative=speculative, options=command.options)


def judged(release: str, arguments: str, **kwargs):
    result = audit(analysis(release), launch(arguments, **kwargs))
    assert result.method.modeled, result.method
    return result


def blocked_at(result, rule_id: str, file: str, message: str):
    assert result.verdict == Verdict.BLOCKED, [(f.rule_id, f.status, f.error) for f in result.findings]
    first = result.blocking[0]
    assert (first.rule_id, first.file) == (rule_id, file), (first.rule_id, first.file, first.error)
    assert message in (first.error or ""), first.error
    assert first.line > 0
    return first


def ready(result):
    assert result.verdict == Verdict.READY, [(f.rule_id, f.status, f.file, f.line, f.why) for f in result.findings
                                             if f.status in (Status.BLOCKS, Status.UNKNOWN)]


# -- NGRAM ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["sglang==0.5.8", "sglang==0.5.23"])
def test_ngram_with_16_draft_tokens_is_ready_and_not_judged_by_the_eagle_handler(release):
    # 0.5.23 _handle_eagle_family: `if not cfg.speculative_adaptive and cfg.speculative_num_steps is None: assert
    # (cfg.speculative_eagle_topk is None and cfg.speculative_num_draft_tokens is None)`: EAGLE's, never NGRAM's.
    result = judged(release, "--speculative-algorithm NGRAM --speculative-num-draft-tokens 16")
    ready(result)
    assert not any(f.rule_id == "sglang-speculative-arguments" for f in result.findings)
    assert any(e.function == "sglang.srt.speculative.ngram_worker:NGRAMWorker.__init__" for e in result.path.entries)


@pytest.mark.parametrize("release, file, arguments", [
    # 0.5.8 _handle_speculative_decoding: `if self.enable_dp_attention: raise ValueError("Currently ngram speculative
    # decoding does not support dp attention.")` in the NGRAM branch.
    ("sglang==0.5.8", SERVER_ARGS, "--enable-dp-attention --dp-size 2"),
    # 0.5.23 _handle_ngram: `if attn_dp_enabled_of(view): raise ...` (runtime_context.py attn_dp_enabled_of:
    # attn_dp_size > 1; parallel_hook.py _handle_deprecated_dp_attention: --dp-size 2 --enable-dp-attention is
    # attn_dp_size 2).
    ("sglang==0.5.23", HOOK, "--enable-dp-attention --dp-size 2"),
    ("sglang==0.5.23", HOOK, "--attn-dp-size 2"),
])
def test_ngram_with_dp_attention_is_refused_by_its_own_handler(release, file, arguments):
    result = judged(release, f"--speculative-algorithm NGRAM {arguments}")
    blocked_at(result, "sglang-ngram-arguments", file, "ngram speculative decoding does not support dp attention")


@pytest.mark.parametrize("release, file", [("sglang==0.5.8", SERVER_ARGS), ("sglang==0.5.23", HOOK)])
def test_ngram_top_k_is_its_bfs_breadth_whatever_the_launch_says(release, file):
    # Both handlers set speculative_eagle_topk = speculative_ngram_max_bfs_breadth (default 10) before refusing
    # `topk > 1 and page_size > 1 and attention_backend != "flashinfer"`: --speculative-eagle-topk 1 changes nothing.
    result = judged(release, "--speculative-algorithm NGRAM --speculative-eagle-topk 1 --page-size 16 "
                             "--attention-backend fa3")
    blocked_at(result, "sglang-ngram-arguments", file, "is only supported for the 'flashinfer' backend")
    ready(judged(release, "--speculative-algorithm NGRAM --page-size 16 --attention-backend flashinfer"))


# -- STANDALONE -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["sglang==0.5.8", "sglang==0.5.17", "sglang==0.5.23"])
def test_standalone_with_a_draft_of_the_target_s_vocabulary_is_ready(release):
    result = judged(release, "--speculative-algorithm STANDALONE --speculative-draft-model-path meta-llama/Llama-3.2-1B",
                    drafter=LLAMA_DRAFT)
    ready(result)
    vocab = next(f for f in result.findings if f.rule_id == "sglang-standalone-draft-vocab")
    assert vocab.status == Status.PASSES


@pytest.mark.parametrize("release, file", [("sglang==0.5.8", SERVER_ARGS), ("sglang==0.5.23", HOOK)])
def test_standalone_with_dp_attention_is_refused(release, file):
    # 0.5.8 _handle_speculative_decoding / 0.5.23 _handle_eagle_family: `if ... == "STANDALONE" and <dp attention>:
    # raise ValueError("Currently standalone speculative decoding does not support dp attention.")`
    result = judged(release, "--speculative-algorithm STANDALONE --speculative-draft-model-path meta-llama/Llama-3.2-1B "
                             "--enable-dp-attention --dp-size 2", drafter=LLAMA_DRAFT)
    blocked_at(result, "sglang-speculative-arguments", file, "standalone speculative decoding does not support dp")


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
def test_standalone_with_a_draft_of_another_vocabulary_is_refused_once_both_have_loaded(release):
    # speculative/standalone_worker_v2.py StandaloneWorkerV2._validate_vocab_compatibility: `if target_vocab_size !=
    # draft_vocab_size: raise ValueError("STANDALONE speculative decoding requires the draft model to share ...")`.
    result = judged(release, "--speculative-algorithm STANDALONE --speculative-draft-model-path Qwen/Qwen2.5-0.5B",
                    drafter=QWEN_DRAFT)
    first = blocked_at(result, "sglang-standalone-draft-vocab", "sglang/srt/speculative/standalone_worker_v2.py",
                       "target vocab_size=128256 and draft vocab_size=151936")
    assert first.phase.value == "drafter_load"


def test_standalone_of_another_vocabulary_where_the_release_does_not_compare_them_is_unknown():
    # 0.5.8 speculative/standalone_worker.py StandaloneWorker compares no vocabularies: not READY, not BLOCKED.
    result = judged("sglang==0.5.8", "--speculative-algorithm STANDALONE --speculative-draft-model-path "
                                     "Qwen/Qwen2.5-0.5B", drafter=QWEN_DRAFT)
    assert result.verdict == Verdict.UNKNOWN
    assert [f.rule_id for f in result.findings if f.status == Status.UNKNOWN] == ["sglang-standalone-draft-vocab"]


# -- DFLASH ---------------------------------------------------------------------------------------------------------
# 0.5.17 and 0.5.23 _handle_dflash: `if cfg.pp_size != 1: raise ...`, `if cfg.speculative_draft_model_path is None:
# raise ...`, and --speculative-dflash-block-size must equal --speculative-num-draft-tokens where both are given.
DFLASH = "--speculative-algorithm DFLASH --speculative-draft-model-path z-lab/Qwen3-8B-DFlash-b16"


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
@pytest.mark.parametrize("arguments, message", [
    ("--speculative-algorithm DFLASH", "DFLASH speculative decoding requires setting --speculative-draft-model-path."),
    (f"{DFLASH} --pp-size 2", "Currently DFLASH speculative decoding only supports pp_size == 1."),
    (f"{DFLASH} --speculative-dflash-block-size 16 --speculative-num-draft-tokens 8", "they differ"),
])
def test_dflash_launches_its_handler_refuses(release, arguments, message):
    blocked_at(judged(release, arguments, preset="qwen3"), "sglang-dflash-arguments", HOOK, message)


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
def test_a_dflash_launch_its_arguments_let_through_is_never_ready_on_what_the_scan_cannot_read(release):
    # DFlashWorkerV2._resolve_mask_token_id resolves the mask token from the target's tokenizer and holds it against
    # the target's vocab_size at load: a scan reads neither tokenizer nor the draft's dflash_config there.
    result = judged(release, f"{DFLASH} --speculative-dflash-block-size 16 --speculative-num-draft-tokens 16",
                    preset="qwen3")
    assert result.verdict in (Verdict.READY, Verdict.UNKNOWN)
    assert not any(f.rule_id == "sglang-dflash-arguments" and f.status == Status.BLOCKS for f in result.findings)


# -- UNO ------------------------------------------------------------------------------------------------------------
# 0.5.23 _handle_uno: `if cfg.uno_lora_path is None: raise ValueError("UNO requires --uno-lora-path.")`; a positive
# --speculative-num-draft-tokens; `if (cfg.tp_size, cfg.pp_size) != (1, 1): raise ValueError("UNO requires
# TP=PP=1.")`; FA3 for prefill and decode (attention_backends_of).
UNO = "--speculative-algorithm UNO --uno-lora-path /loras/uno --speculative-num-draft-tokens 4 --attention-backend fa3"


def test_uno_with_its_lora_on_fa3_is_ready():
    ready(judged("sglang==0.5.23", UNO))


@pytest.mark.parametrize("arguments, message", [
    (UNO.replace("--uno-lora-path /loras/uno ", ""), "UNO requires --uno-lora-path."),
    (f"{UNO} --tp 2", "UNO requires TP=PP=1."),
    (UNO.replace("fa3", "flashinfer"), "UNO requires FA3 for both prefill and decode attention"),
    ("--speculative-algorithm UNO --uno-lora-path /loras/uno", "UNO requires --speculative-num-draft-tokens"),
])
def test_uno_launches_its_handler_refuses(arguments, message):
    blocked_at(judged("sglang==0.5.23", arguments), "sglang-uno-arguments", HOOK, message)


def test_uno_is_not_in_older_releases():
    result = audit(analysis("sglang==0.5.17"), launch(UNO))
    assert result.verdict == Verdict.BLOCKED and result.blocking[0].rule_id == "method-not-in-release"


# -- metamorphic: a launch-value check written otherwise keeps its verdict ------------------------------------------

HANDLER_FORMS = {
    "if ... raise": """
        def _handle_uno(server_args):
            cfg = resolving_view(server_args)
            if cfg.uno_lora_path is None:
                raise ValueError("UNO requires --uno-lora-path.")
    """,
    "assert": """
        def _handle_uno(server_args):
            cfg = resolving_view(server_args)
            assert cfg.uno_lora_path is not None, "UNO requires --uno-lora-path."
    """,
    "nested, else branch": """
        def _handle_uno(server_args):
            cfg = resolving_view(server_args)
            if cfg.uno_lora_path is not None:
                pass
            else:
                raise ValueError("UNO requires --uno-lora-path.")
    """,
}
HELPER = """
    from sglang.srt.arg_groups.uno_checks import _check_uno_lora


    def _handle_uno(server_args):
        _check_uno_lora(server_args)
"""
HELPER_MODULE = """
    def _check_uno_lora(server_args):
        cfg = resolving_view(server_args)
        if cfg.uno_lora_path is None:
            raise ValueError("UNO requires --uno-lora-path.")
"""


def _uno_rule(functions):
    from specaudit.scan.ruleset import load_rules

    rule = next(r for r in load_rules("sglang") if r.id == "sglang-uno-arguments")
    return replace(rule, params={**rule.params, "functions": functions, "dedicated": functions})


def _judge_forms(make_tree, files, functions):
    from specaudit.scan.facts import module_info, parse
    from specaudit.scan.gates import KINDS
    from specaudit.scan.match import find_sites

    rule = _uno_rule(functions)
    root = make_tree(files)
    statuses = {}
    for relpath in files:
        source = (root / relpath).read_text()
        tree = parse(source.encode(), relpath)
        for site in find_sites(tree, source, module_info(tree, relpath), relpath, (rule,))[rule.id]:
            for name, arguments in (("taken", "--uno-lora-path /l"), ("refused", "")):
                judge = _ArgumentJudge(launch(f"--speculative-algorithm UNO {arguments}").options)
                statuses.setdefault(name, set()).add(KINDS[rule.kind].judge(rule, site, judge).status)
    return statuses


class _ArgumentJudge:
    """The launch's arguments over the handler's declared defaults (here: uno_lora_path None)."""

    def __init__(self, options):
        self.options = options

    def argument_values(self, defaults_files):
        return {"uno_lora_path": None, "speculative_algorithm": "UNO", **self.options}


@pytest.mark.parametrize("form", sorted(HANDLER_FORMS) + ["moved to a helper in another module"])
def test_a_launch_value_check_written_otherwise_keeps_its_verdict(make_tree, form):
    if form in HANDLER_FORMS:
        statuses = _judge_forms(make_tree, {"sglang/srt/arg_groups/speculative_hook.py": HANDLER_FORMS[form]},
                                ["_handle_uno"])
    else:
        # The helper is a handler of its own: a rule names where the engine's checks live, whatever module holds them.
        statuses = _judge_forms(make_tree, {"sglang/srt/arg_groups/speculative_hook.py": HELPER,
                                            "sglang/srt/arg_groups/uno_checks.py": HELPER_MODULE},
                                ["_handle_uno", "_check_uno_lora"])
    assert statuses == {"taken": {Status.PASSES}, "refused": {Status.BLOCKS}}

"""SGLang's speculative algorithms through the method seam: each judged by its own handler's checks, its own worker's
path and its own drafter checks, never by another algorithm's (issue 24, SGLang half).

Facts from the releases' source (read, not run):
- 0.5.23 speculative/spec_info.py SpeculativeAlgorithm.handle_server_args dispatches per algorithm: `if
  self.is_dflash(): _handle_dflash(...) elif self.is_uno(): _handle_uno(...) ... elif self.is_eagle() or
  self.is_standalone(): _handle_eagle_family(...) elif self.is_ngram(): _handle_ngram(...)` (the handlers in
  arg_groups/speculative_hook.py); create_worker picks NGRAMWorker, StandaloneWorkerV2, DFlashWorkerV2, UnoWorkerV2.
- 0.5.8 server_args.py ServerArgs._handle_speculative_decoding holds every algorithm's checks under `if
  self.speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):` and `if self.speculative_algorithm == "NGRAM":`.
- 0.5.17 has DFLASH, DSPARK and FROZEN_KV_MTP (no UNO); 0.5.8 has EAGLE, EAGLE3, STANDALONE, NGRAM; UNO is only in
  0.5.23 of the releases here. From 0.5.17 a plugin may register an algorithm of its own (SpeculativeAlgorithm.register).
"""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from specaudit.core.types import Status, Verdict
from specaudit.launch.checkpoint import Checkpoint
from specaudit.launch.command import parse_launch_command
from specaudit.launch.request import Launch, method_of
from specaudit.launch.target import Target, load_preset
from specaudit.scan.audit import audit

from conftest import engine_analysis

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

    target = None  # no target config for the handler's facts to read

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


# -- DSPARK ---------------------------------------------------------------------------------------------------------
# 0.5.17 and 0.5.23: SpeculativeAlgorithm.handle_server_args `elif self.is_dspark(): _handle_dspark(server_args)`
# (arg_groups/speculative_hook.py), create_worker -> DSparkWorkerV2 (speculative/dspark_components/dspark_worker_v2.py),
# whose __init__ builds the draft (models/dspark.py DSparkDraftMixin.__init__), resolve_runtime_config
# (dspark_components/dspark_config.py: Markov rank > 0, a mask token id inside the target vocab) and takes the target's
# lm_head; the target captures its layers (attention_backend_setup.py configure_aux_hidden_state_capture:
# set_dspark_layers_to_capture or set_dflash_layers_to_capture, else ValueError).
DSPARK = "--speculative-algorithm DSPARK --speculative-draft-model-path x/Qwen3-8B-DSpark"
# A DSpark draft for Qwen3-8B (vocab_size 151936): a DFlash backbone with a Markov head and the mask token id it was
# trained with, in its own config.json (not the target's tokenizer: a scan reads it).
DSPARK_DRAFT = {"architectures": ["DSparkDraftModel"], "model_type": "qwen3", "hidden_size": 4096,
                "num_hidden_layers": 2, "vocab_size": 151936, "block_size": 7, "markov_rank": 16,
                "markov_head_type": "vanilla", "mask_token_id": 151669}
DSPARK_CONFIG = "sglang/srt/speculative/dspark_components/dspark_config.py"


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
@pytest.mark.parametrize("arguments", ["", "--speculative-dspark-block-size 7 --speculative-num-draft-tokens 8"])
def test_a_dspark_launch_with_its_draft_is_ready(release, arguments):
    # Nothing of it is left to launch time: the mask token id is the draft config's (resolve_runtime_config), unlike
    # DFLASH's, and the target's lm_head is a ParallelLMHead whose unquantized weight is its "weight" parameter.
    result = judged(release, f"{DSPARK} {arguments}", preset="qwen3", drafter=DSPARK_DRAFT)
    ready(result)
    draft = next(f for f in result.findings if f.rule_id == "sglang-dspark-draft-config")
    assert (draft.status, draft.file) == (Status.PASSES, DSPARK_CONFIG), draft
    assert any(e.function.endswith("DSparkWorkerV2.__init__") for e in result.path.entries)
    assert not any(f.rule_id in ("sglang-dflash-arguments", "sglang-speculative-arguments") for f in result.findings)


@pytest.mark.parametrize("release, arguments, message", [
    # 0.5.17 `if server_args.pp_size != 1: raise ValueError("Currently DSpark speculative decoding only supports
    # pp_size == 1.")`; 0.5.23 the same unless on a PD prefill node (`cfg.disaggregation_mode != "prefill"`).
    ("sglang==0.5.17", f"{DSPARK} --pp-size 2", "Currently DSpark speculative decoding only supports pp_size == 1."),
    ("sglang==0.5.23", f"{DSPARK} --pp-size 2", "DSpark pipeline parallelism requires PD prefill"),
    # `if gamma is not None: ... if ... int(cfg.speculative_num_draft_tokens) != verify_window: raise` (gamma + 1)
    ("sglang==0.5.17", f"{DSPARK} --speculative-dspark-block-size 7 --speculative-num-draft-tokens 4",
     "DSpark speculative_num_draft_tokens must equal gamma + 1"),
    ("sglang==0.5.23", f"{DSPARK} --speculative-dspark-block-size 7 --speculative-num-draft-tokens 4",
     "DSpark speculative_num_draft_tokens must equal gamma + 1"),
    ("sglang==0.5.23", f"{DSPARK} --speculative-dspark-block-size 0",
     "DSpark requires --speculative-dspark-block-size to be positive, got 0."),
    ("sglang==0.5.17", f"{DSPARK} --speculative-num-draft-tokens 1",
     "DSpark speculative_num_draft_tokens must be >= 2 (= gamma + 1), got 1."),
    # 0.5.17 `if server_args.enable_dp_attention: if not server_args.enable_dp_lm_head: raise ...`; 0.5.23 `if
    # cfg.attn_dp_size > 1:` (parallel_hook.py: --dp-size 2 --enable-dp-attention is attn_dp_size 2).
    ("sglang==0.5.17", f"{DSPARK} --enable-dp-attention --dp-size 2", "DSpark with dp attention requires --enable-dp-lm-head."),
    ("sglang==0.5.23", f"{DSPARK} --enable-dp-attention --dp-size 2", "DSpark with dp attention requires --enable-dp-lm-head."),
    # No draft path, and a target whose config bundles no DSpark head (no dspark_* key): 0.5.17 raises.
    ("sglang==0.5.17", "--speculative-algorithm DSPARK",
     "DSpark dense speculative decoding requires setting --speculative-draft-model-path."),
])
def test_dspark_launches_its_handler_refuses(release, arguments, message):
    drafter = DSPARK_DRAFT if "--speculative-draft-model-path" in arguments else None
    blocked_at(judged(release, arguments, preset="qwen3", drafter=drafter), "sglang-dspark-arguments", HOOK, message)


def test_dspark_without_a_draft_path_on_0_5_23_turns_on_the_target_s_checkpoint():
    # 0.5.23 _handle_dspark looks for a dspark/ subfolder of the target's checkpoint (_target_checkpoint_dspark_subfolder,
    # a Hub download for a repo id) before it raises: not read by the scan, so UNKNOWN, never READY.
    result = judged("sglang==0.5.23", "--speculative-algorithm DSPARK", preset="qwen3")
    assert result.verdict == Verdict.UNKNOWN
    (gate,) = [f for f in result.findings if f.rule_id == "sglang-dspark-arguments" and f.status == Status.UNKNOWN]
    assert "requires setting --speculative-draft-model-path" in gate.error and "target's checkpoint" in gate.why


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
def test_dspark_without_a_draft_path_takes_the_one_the_target_bundles(release):
    # dspark_config.checkpoint_bundles_dspark_draft: a dspark_* key on the target's config; _handle_dspark then sets the
    # draft path to the target's.
    bundling = replace(load_preset("qwen3"), config={**load_preset("qwen3").config, "dspark_block_size": 7})
    command = parse_launch_command(shlex.split("python -m sglang.launch_server --model-path t "
                                               "--speculative-algorithm DSPARK"))
    result = audit(analysis(release), Launch(bundling, method="dspark", engine="sglang", speculative=command.speculative,
                                             options=command.options))
    gates = [f for f in result.findings if f.rule_id == "sglang-dspark-arguments"]
    assert any(f.status == Status.PASSES and "_target_checkpoint_bundles_dspark_draft" in f.why for f in gates), gates
    assert not any(f.status in (Status.BLOCKS, Status.UNKNOWN) for f in gates), gates


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
@pytest.mark.parametrize("change, file, message", [
    # models/dspark.py DSparkDraftMixin.__init__, as the draft is built: `if not dspark_config.require_markov(): raise`
    ({"markov_rank": 0}, "sglang/srt/models/dspark.py", "DSpark draft requires markov_rank > 0"),
    # dspark_config.py parse_dspark_draft_config: the head types it builds (SUPPORTED_DSPARK_MARKOV_HEAD_TYPES)
    ({"markov_head_type": "mlp"}, DSPARK_CONFIG, "Unsupported DSpark markov_head_type='mlp'"),
    # resolve_runtime_config: `if draft_config.mask_token_id is None: raise`, `if mask_token_id >= target_vocab_size`
    ({"mask_token_id": None}, DSPARK_CONFIG, "DSpark requires mask_token_id to be set in the draft model config."),
    ({"mask_token_id": 152000}, DSPARK_CONFIG, "DSpark mask_token_id=152000 is outside the target vocab size 151936."),
])
def test_a_dspark_draft_the_release_cannot_run_is_refused_where_it_loads(release, change, file, message):
    drafter = {k: v for k, v in {**DSPARK_DRAFT, **change}.items() if v is not None}
    first = blocked_at(judged(release, DSPARK, preset="qwen3", drafter=drafter), "sglang-dspark-draft-config", file,
                       message)
    assert first.phase.value == "drafter_load"


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
def test_dspark_on_a_target_that_captures_no_layers_is_refused(release):
    # GLM-4.5 (Glm4MoeForCausalLM, models/glm4_moe.py) has neither set_dspark_layers_to_capture nor
    # set_dflash_layers_to_capture: configure_aux_hidden_state_capture raises ValueError("Model ... implements neither").
    glm_draft = {**DSPARK_DRAFT, "vocab_size": 151552, "mask_token_id": 151329}
    result = judged(release, DSPARK, preset="glm-4.5", drafter=glm_draft)
    blocked_at(result, "path-raise", "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py",
               "Model Glm4MoeForCausalLM implements neither set_dspark_layers_to_capture nor set_dflash_layers_to_capture")


# -- FROZEN_KV_MTP --------------------------------------------------------------------------------------------------
# A Gemma-4 assistant draft (models/gemma4_mtp.py Gemma4AssistantForCausalLM) that reads the target's KV read-only
# (FrozenKVMTPWorkerV2). _resolve_speculative_algorithm_alias (arg_groups/speculative_hook.py) promotes EAGLE or NEXTN
# with such a draft to FROZEN_KV_MTP; _handle_frozen_kv_mtp raises nothing. Not the target's own layers (unlike NEXTN):
# the assistant is a checkpoint of its own.
GEMMA4 = {"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "hidden_size": 2560,
          "intermediate_size": 10240, "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 2,
          "head_dim": 256, "vocab_size": 262144, "rms_norm_eps": 1e-06, "max_position_embeddings": 131072,
          "sliding_window": 512, "tie_word_embeddings": True, "attention_bias": False,
          "hidden_activation": "gelu_pytorch_tanh", "num_kv_shared_layers": 0,
          "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
          "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                              "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}
ASSISTANT = {"architectures": ["Gemma4AssistantForCausalLM"], "model_type": "gemma4_assistant",
             "backbone_hidden_size": 2560,
             "text_config": {"model_type": "gemma4_text", "hidden_size": 1024, "num_hidden_layers": 2,
                             "vocab_size": 262144, "layer_types": ["sliding_attention", "full_attention"],
                             "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
                             "intermediate_size": 4096, "sliding_window": 512, "tie_word_embeddings": True}}
GEMMA4_MTP = "sglang/srt/models/gemma4_mtp.py"


def gemma4_launch(arguments: str, assistant: dict) -> Launch:
    command = parse_launch_command(shlex.split(f"python -m sglang.launch_server --model-path google/gemma-4 {arguments}"))
    speculative = command.speculative
    return Launch(Target("google/gemma-4", "test", GEMMA4), method=method_of(speculative), engine="sglang",
                  draft=speculative.get("model"), drafter=Checkpoint(speculative["model"], assistant, {}),
                  speculative=speculative, options=command.options)


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN", "FROZEN_KV_MTP"])
def test_a_gemma4_assistant_is_frozen_kv_mtp_and_ready(release, algorithm):
    result = audit(analysis(release), gemma4_launch(f"--speculative-algorithm {algorithm} "
                                                    "--speculative-draft-model-path google/gemma-4-assistant",
                                                    ASSISTANT))
    assert (result.method.method, result.method.modeled) == ("frozen_kv_mtp", True), result.method
    ready(result)
    contract = next(f for f in result.findings if f.rule_id == "sglang-frozen-kv-mtp-assistant")
    assert (contract.status, contract.file) == (Status.PASSES, GEMMA4_MTP)
    assert any(e.function.endswith("FrozenKVMTPWorkerV2.__init__") for e in result.path.entries)


@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
@pytest.mark.parametrize("change, message", [
    # build_frozen_kv_mtp_context: each assistant layer reads the target's last layer of its type among L-2 and L-1
    ({"text_config": {**ASSISTANT["text_config"], "layer_types": ["sliding_attention", "chunked_attention"]}},
     "ValueError: Frozen-KV MTP assistant layer 1 has type 'chunked_attention', expected one of "
     "['full_attention', 'sliding_attention']."),
    # __init__: pre_projection = ReplicatedLinear(2 * backbone_hidden_size, ...) over the target's embed + hidden
    ({"backbone_hidden_size": 1536}, "mat1 and mat2 shapes cannot be multiplied"),
])
def test_a_gemma4_assistant_of_another_target_is_refused(release, change, message):
    result = audit(analysis(release), gemma4_launch("--speculative-algorithm FROZEN_KV_MTP "
                                                    "--speculative-draft-model-path a", {**ASSISTANT, **change}))
    blocked_at(result, "sglang-frozen-kv-mtp-assistant", GEMMA4_MTP, message)


@pytest.mark.parametrize("release, option, message", [
    # 0.5.17 handle_speculative_decoding: `assert server_args.speculative_algorithm == "EAGLE"` under the flag
    ("sglang==0.5.17", "--speculative-skip-dp-mlp-sync", "is only supported with speculative_algorithm == EAGLE, got "
                                                          "FROZEN_KV_MTP."),
    # 0.5.23 handle_speculative_decoding: block verification only for EAGLE / EAGLE3 / DFLASH / DSPARK
    ("sglang==0.5.23", "--speculative-use-block-verification",
     "--speculative-use-block-verification only supports EAGLE / EAGLE3 / NEXTN / DFLASH / DSPARK."),
])
def test_frozen_kv_mtp_is_refused_what_every_algorithm_s_checks_refuse_it(release, option, message):
    result = audit(analysis(release), gemma4_launch(f"--speculative-algorithm NEXTN --speculative-draft-model-path a "
                                                    f"{option}", ASSISTANT))
    blocked_at(result, "sglang-frozen-kv-mtp-arguments", HOOK, message)


def test_frozen_kv_mtp_turns_mixed_chunking_off_rather_than_refusing_it():
    # _handle_frozen_kv_mtp declares enable_mixed_chunk=False before check_server_args' supports_mixed_chunk() assert.
    ready(audit(analysis("sglang==0.5.23"), gemma4_launch("--speculative-algorithm FROZEN_KV_MTP "
                                                          "--speculative-draft-model-path a --enable-mixed-chunk",
                                                          ASSISTANT)))


# -- plugin algorithms ----------------------------------------------------------------------------------------------
# 0.5.17 and 0.5.23: SpeculativeAlgorithm.from_string falls back to the plugin registry (spec_registry.get_spec) for a
# name not in the enum; plugins register through SpeculativeAlgorithm.register when sglang.srt.plugins loads them
# (entry points of the engine's environment). 0.5.8 has no registry: `SpeculativeAlgorithm[name]` or nothing.

@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
def test_a_plugin_algorithm_is_unknown_and_judged_by_no_built_in_s_checks(release):
    result = audit(analysis(release), launch("--speculative-algorithm MY_SPEC --speculative-draft-model-path x/y",
                                             drafter=DSPARK_DRAFT))
    assert result.verdict == Verdict.UNKNOWN
    assert not result.method.modeled
    (stop,) = [f for f in result.findings if f.status != Status.PASSES]
    assert stop.rule_id == "method-not-modeled" and "plugin" in stop.why and "spec_info.py" in stop.why
    assert not result.path.entries


def test_an_algorithm_of_no_plugin_registry_is_refused_on_0_5_8():
    result = audit(analysis("sglang==0.5.8"), launch("--speculative-algorithm MY_SPEC"))
    assert result.verdict == Verdict.BLOCKED and result.blocking[0].rule_id == "method-not-in-release"

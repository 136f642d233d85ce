"""The cells of the GPU differential grid: one launch each, on vLLM 0.26.0 or SGLang 0.5.17 (validation/gpu/README.md).

Shared by the device drivers (grid.py) and the report (report.py): a cell's name is its log's name under
validation/gpu/logs/<engine>/. Standard library only (the device runs it with the image's python).
"""

from __future__ import annotations

import json

# name: architecture (what vLLM 0.26.0's registry maps)
GRID_TARGETS = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3moe": "Qwen3MoeForCausalLM",
    "gpt2": "GPT2LMHeadModel",
    "gemma": "GemmaForCausalLM",
    "llava": "LlavaForConditionalGeneration",
}
DRAFTERS = {
    "agree": "hidden and vocab of the target, no aux layer ids: vLLM's default (2, L//2, L-3)",
    "aux-inside": "drafter-agree naming aux layers [1, 2, 3], inside every target",
    "d2t-short": "d2t has 127 entries for a draft vocab of 128",
    "fc-width": "fc built for three aux states of width 128 ([256, 384], config asks [256, 768])",
    "aux-beyond": "eagle_aux_hidden_state_layer_ids [1, 4, 20]: layer 20 is beyond the target's layers",
}

NUM_SPEC = 3


def vllm_spec(cell: dict, models: str) -> dict | None:
    """The --speculative-config of a vLLM cell (None: no speculative decoding)."""
    if cell.get("spec") is not None:  # the methods' cells (METHOD_CELLS): their config as written, MODELS/ filled in
        return {k: v.replace("MODELS/", f"{models}/") if isinstance(v, str) else v for k, v in cell["spec"].items()}
    if cell["method"] == "eagle3":
        return {"method": "eagle3", "model": f"{models}/{cell['drafter_dir']}", "num_speculative_tokens": NUM_SPEC}
    if cell["method"] == "ngram":
        return {"method": "ngram", "num_speculative_tokens": NUM_SPEC, "prompt_lookup_max": 3,
                "prompt_lookup_min": 1}
    if cell["method"] == "draft_model":  # no method: vLLM resolves a plain causal LM drafter as draft_model
        return {"model": f"{models}/{cell['drafter_dir']}", "num_speculative_tokens": NUM_SPEC}
    return None


def _cell(engine: str, target: str, drafter: str, method: str = "eagle3", **extra) -> dict:
    name = f"{target}--{drafter}" + (f"--{extra['variant']}" if extra.get("variant") else "")
    drafter_dir = {"random": "drafter-random", "draft_model": "target-random", "ngram": None}.get(
        drafter, f"drafter-{drafter}")
    target_dir = "target-random" if drafter == "random" else f"target-{target}"
    return dict(engine=engine, name=name, target=target, drafter=drafter, method=method, target_dir=target_dir,
                drafter_dir=drafter_dir, eager=extra.get("variant") != "compiled", variant=extra.get("variant"))


VLLM_CELLS = [_cell("vllm", t, d) for t in GRID_TARGETS for d in DRAFTERS] + [
    _cell("vllm", "llama", "random"),
    _cell("vllm", "llama", "ngram", "ngram"),
    _cell("vllm", "llama", "draft_model", "draft_model"),
    _cell("vllm", "llama", "agree", variant="compiled"),
]


def _method_cell(drafter: str, method: str, spec: dict, drafter_dir: str | None = None, target: str = "llama",
                 scan: str = "release") -> dict:
    """A vLLM 0.26.0 launch of a grid target (Llama unless told) with a method other than EAGLE-3 (issues 24 and 26;
    rules/methods/vllm/): its --speculative-config as written ("MODELS/" is the checkpoints' folder). scan: which
    install the report scans it against ("release": vllm==0.26.0 fetched on its own; "device": the device's layout,
    for a gate that reads what is installed beside vLLM)."""
    return dict(engine="vllm", name=f"{target}--{drafter}", target=target, drafter=drafter, method=method,
                target_dir=f"target-{target}", drafter_dir=drafter_dir, eager=True, variant=None, spec=spec, scan=scan)


# The methods specaudit models beside EAGLE-3 and MTP (round 4): one launch each that the engine serves or refuses.
METHOD_CELLS = [
    # EAGLE-1 (llama_eagle.py: fc of 2 x hidden, one decoder layer without input_layernorm), built to agree
    _method_cell("eagle1", "eagle", {"method": "eagle", "model": "MODELS/drafter-eagle1", "num_speculative_tokens": 3},
                 "drafter-eagle1"),
    # the same head with an fc of 3 x hidden (an EAGLE-3 width): ReplicatedLinear's weight_loader refuses it
    _method_cell("eagle1-fc3x", "eagle", {"method": "eagle", "model": "MODELS/drafter-eagle1-fc3x",
                                          "num_speculative_tokens": 3}, "drafter-eagle1-fc3x"),
    # a Llama draft of vocabulary 1024 for the target's 512: verify_equal_vocab_size_if_draft_model
    _method_cell("draft_model-vocab", "draft_model", {"model": "MODELS/draft-vocab1024", "num_speculative_tokens": 3},
                 "draft-vocab1024"),
    # prompt_lookup_min 5 > prompt_lookup_max 2: SpeculativeConfig.__post_init__
    _method_cell("ngram-min-over-max", "ngram", {"method": "ngram", "num_speculative_tokens": 3,
                                                 "prompt_lookup_min": 5, "prompt_lookup_max": 2}),
    _method_cell("ngram_gpu", "ngram_gpu", {"method": "ngram_gpu", "num_speculative_tokens": 3,
                                            "prompt_lookup_max": 3, "prompt_lookup_min": 1}),
    # without arctic-inference (the device has none): _validate_suffix_decoding's ImportError
    _method_cell("suffix", "suffix", {"method": "suffix", "num_speculative_tokens": 3}, scan="device"),
    # hidden-state extraction: k must be 1; the layer ids from draft_model_config.hf_config (8-layer target)
    _method_cell("extract_hidden_states", "extract_hidden_states", {
        "method": "extract_hidden_states", "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [1, 4, 6]}}}),
    _method_cell("extract_hidden_states-no-ids", "extract_hidden_states",
                 {"method": "extract_hidden_states", "num_speculative_tokens": 1}),
] + [
    # Round 5 (grid_models.py builds the drafters): DFlash, DSpark, Medusa, MLPSpeculator, a custom proposer class.
    # DFlash on the 4-layer Qwen3 target, V2 runner (a dense target, a method V2 runs: VllmConfig.use_v2_model_runner).
    # Serves: 2 draft layers on target layers [1, 3] (V2 eagle3_utils.get_eagle3_aux_layers_from_config adds one:
    # hidden states 2 and 4), fc 2 x hidden, mask token in dflash_config (V2 spec_decode/utils.py
    # get_parallel_drafting_token_id)
    _method_cell(drafter, "dflash", {"method": "dflash", "model": f"MODELS/{folder}", "num_speculative_tokens": 3},
                 folder, target="qwen3") for drafter, folder in (
        ("dflash", "drafter-dflash"),
        # crashes at load: fc of 3 x hidden for the 2 x hidden DFlashQwen3Model.__init__ builds from
        # len(dflash_config.target_layer_ids); ReplicatedLinear.weight_loader's assert (layers/linear.py)
        ("dflash-fc3x", "drafter-dflash-fc3x"),
        # crashes in the profile run (gpu_worker.determine_available_memory -> profile_run -> DFlashSpeculator.propose,
        # dummy_run): target_layer_ids [1, 20], layer 21 is beyond the target's 4, one hidden state of width 256
        # reaches DFlashQwen3ForCausalLM.combine_hidden_states, which raises "DFlash drafter expects 512
        # concatenated aux hidden features but received 256"
        ("dflash-layer-beyond", "drafter-dflash-layer-beyond"))
] + [
    # DSpark (Qwen3DSparkModel -> qwen3_dspark.Qwen3DSparkForCausalLM), on V2 only: VllmConfig.use_v2_model_runner
    # forces V2 for method "dspark". Serves: dspark_block_size 3 = num_speculative_tokens
    _method_cell("dspark", "dspark", {"method": "dspark", "model": "MODELS/drafter-dspark", "num_speculative_tokens": 3},
                 "drafter-dspark", target="qwen3"),
    # refused in SpeculativeConfig.__post_init__ (config/speculative.py): "DSpark requires num_speculative_tokens >=
    # dspark_block_size (7); got 3"
    _method_cell("dspark-block7", "dspark", {"method": "dspark", "model": "MODELS/drafter-dspark-block7",
                                             "num_speculative_tokens": 3}, "drafter-dspark-block7", target="qwen3"),
    # Medusa (MedusaModel -> medusa.Medusa) on the agreeing Llama target: serves on V1 (V2's
    # _get_v2_model_runner_unsupported_features: "speculative method 'medusa'"; GPUModelRunner.__init__ builds
    # MedusaProposer, v1/spec_decode/medusa.py), async scheduling off (VllmConfig: not an EAGLE-type method)
    _method_cell("medusa", "medusa", {"method": "medusa", "model": "MODELS/drafter-medusa", "num_speculative_tokens": 3},
                 "drafter-medusa"),
    # MLPSpeculator: refused while SpeculativeConfig.__post_init__ builds the draft's ModelConfig: its registry entry
    # is a comment in 0.26.0 (models/registry.py), so ModelConfig.__post_init__'s registry lookup ends in
    # _ModelRegistry._raise_for_unsupported: "Model architectures ['MLPSpeculatorPreTrainedModel'] are not supported
    # for now"
    _method_cell("mlp_speculator", "mlp_speculator", {"model": "MODELS/drafter-mlp-speculator",
                                                      "num_speculative_tokens": 3}, "drafter-mlp-speculator"),
    # a dotted path as model: SpeculativeConfig._is_custom_proposer_path makes the method custom_class; V1 runner;
    # crashes in GPUModelRunner.__init__: create_custom_proposer (v1/spec_decode/custom_class_proposer.py) raises
    # ImportError "Cannot import module 'no_such_pkg.proposers'". Scanned with the device's modules, as suffix: the
    # import is judged against what is installed there
    _method_cell("custom_class", "custom_class", {"model": "no_such_pkg.proposers.MyProposer",
                                                  "num_speculative_tokens": 3}, scan="device"),
    # (a draft model whose attention heads the TP does not divide needs TP > 1: not on one GPU)
]
VLLM_CELLS += METHOD_CELLS

SGLANG_CELLS = [_cell("sglang", "llama", "agree")] + [
    _cell("sglang", t, d) for t, d in (
        ("llama", "random"), ("llama", "d2t-short"), ("llama", "fc-width"), ("llama", "aux-beyond"),
        ("llama", "aux-inside"), ("qwen2", "aux-inside"), ("qwen3", "agree"), ("qwen3moe", "aux-inside"),
        ("gemma", "agree"), ("gpt2", "agree"), ("llava", "agree"))] + [
    _cell("sglang", "llama", "agree", variant="compiled")]  # with CUDA graphs (run alone: CELLS=llama--agree--compiled)


def vllm_command(cell: dict, models: str, port: int, python: str = "python3") -> list[str]:
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", f"{models}/{cell['target_dir']}",
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "512",
           "--gpu-memory-utilization", "0.05", "--kv-cache-memory-bytes", str(1 << 30)]
    if cell["eager"]:
        cmd.append("--enforce-eager")
    spec = vllm_spec(cell, models)
    if spec:
        cmd += ["--speculative-config", json.dumps(spec)]
    return cmd


def sglang_command(cell: dict, models: str, port: int, python: str = "python3") -> list[str]:
    return [python, "-m", "sglang.launch_server", "--model-path", f"{models}/{cell['target_dir']}",
            "--dtype", "bfloat16", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", f"{models}/{cell['drafter_dir']}", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--attention-backend", "triton",
            "--sampling-backend", "pytorch", "--context-length", "512", "--mem-fraction-static", "0.85",
            "--max-total-tokens", "8192", "--max-running-requests", "8", "--enable-metrics",
            *(["--disable-cuda-graph"] if cell["eager"] else []),
            "--host", "127.0.0.1", "--port", str(port)]

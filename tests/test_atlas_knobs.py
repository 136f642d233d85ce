"""A guard's names as what a launch sets (knobs.py), on the fields of the flag classes as a release declares them."""

from __future__ import annotations

import pytest

from specaudit.explain.knobs import knob_of

FIELDS = {"SpeculativeConfig": frozenset({"method", "num_speculative_tokens", "target_model_config"}),
          "EngineArgs": frozenset({"max_model_len", "speculative_config"}),
          "ServerArgs": frozenset({"speculative_algorithm"})}


@pytest.mark.parametrize(("name", "function", "knob"), [
    ("self.num_speculative_tokens", "SpeculativeConfig.__post_init__", '--speculative-config key "num_speculative_tokens"'),
    ("self.vllm_config.speculative_config.method", "GPUModelRunner.load_model", '--speculative-config key "method"'),
    ("self.model_config.max_model_len", "Scheduler.__init__", "--max-model-len"),
    ("self.speculative_config", "EngineArgs.create_engine_config", "--speculative-config"),
    ("cfg.speculative_algorithm", "handle_speculative_decoding", "--speculative-algorithm"),
    ("server_args.speculative_algorithm", "launch", "--speculative-algorithm"),
    ("envs.VLLM_USE_V1", "f", "the environment variable VLLM_USE_V1"),
    ('os.environ.get("SGLANG_ENABLE_X")', "f", "the environment variable SGLANG_ENABLE_X"),
    ("self.draft_model_config.hf_config.num_hidden_layers", "SpeculativeConfig.__post_init__",
     "`num_hidden_layers` in the drafter's config.json"),
    # not a launch's: the engine sets the target's config; a layer's own attribute of a flag's name
    ("self.target_model_config", "SpeculativeConfig._verify_args", None),
    ("self.max_model_len", "RotaryEmbedding.forward", None),
    ("n_predict", "SpeculativeConfig.__post_init__", None),
])
def test_a_guard_name_is_the_knob_a_launch_sets_or_none(name, function, knob):
    assert knob_of(name, function, FIELDS) == knob

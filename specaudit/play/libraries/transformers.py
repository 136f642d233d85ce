"""transformers' config objects as engine code uses them (vLLM's EAGLEConfig wraps a drafter's config:
``AutoConfig.for_model(**model)``, ``super().__init__(**kwargs)``, ``model.to_dict()``): a config is a
play.values.ConfigObject, its attributes its keys.

What transformers does is read from its source (5.x, ``configuration_utils.py``, ``models/auto/configuration_auto.py``)
and kept to what the engines call: ``PretrainedConfig.__init__`` sets each keyword it is given as an attribute,
``to_dict`` gives the attributes back as a dict, ``get_text_config`` the text model's config (``text_config`` where
the config has one, else itself), ``AutoConfig.for_model(model_type, **kwargs)`` a config of that type with those
attributes.
"""

from __future__ import annotations

from typing import Any

from ..values import CLASS, UNKNOWN, ConfigObject, Unknown

# The config base class, by the names transformers has exported it under (PreTrainedConfig since 5.0).
CONFIG_BASES = frozenset({"transformers.PretrainedConfig", "transformers.PreTrainedConfig",
                          "transformers.configuration_utils.PretrainedConfig",
                          "transformers.configuration_utils.PreTrainedConfig"})

# Attributes every transformers PretrainedConfig has, whether or not config.json lists them.
PRETRAINED_CONFIG_DEFAULTS: dict[str, Any] = {
    "return_dict": True, "output_hidden_states": False, "torchscript": False, "torch_dtype": None,
    "tie_word_embeddings": True, "is_encoder_decoder": False, "is_decoder": False, "architectures": None,
    "finetuning_task": None, "tokenizer_class": None, "prefix": None, "bos_token_id": None, "pad_token_id": None,
    "eos_token_id": None, "sep_token_id": None, "decoder_start_token_id": None, "task_specific_params": None,
    "problem_type": None, "chunk_size_feed_forward": 0, "add_cross_attention": False, "name_or_path": "",
    "transformers_version": None, "id2label": None, "label2id": None, "num_labels": 2, "output_attentions": False,
    "pruned_heads": {}, "cross_attention_hidden_size": None, "tf_legacy_loss": False, "use_bfloat16": False,
    "_name_or_path": "", "_attn_implementation": None, "quantization_config": None,
}


PRETRAINED_CONFIG_METHODS = frozenset({"get_text_config", "to_dict", "to_diff_dict", "to_json_string", "update",
                                       "save_pretrained", "get", "__getattribute__", "__setattr__"})


ABSENT = object()  # what `attribute` answers for an attribute a config does not have


def is_config_class(outside_bases: list[str]) -> bool:
    """Whether a class of the release whose bases outside it are these is a transformers config."""
    return any(base in CONFIG_BASES for base in outside_bases)


def call(origin: str, args: list[Any], named: dict[str, Any]) -> Any:
    """A call of transformers' own (``AutoConfig.for_model``): its value, or None where it is not one played here."""
    if origin == "transformers.AutoConfig.for_model":
        model_type = args[0] if args else named.get("model_type", UNKNOWN)
        if len(args) > 1 or not isinstance(model_type, str):
            return UNKNOWN
        return ConfigObject({**named, "model_type": model_type})
    return None


def initialize(this: dict[str, Any], args: list[Any], named: dict[str, Any]) -> None:
    """``PretrainedConfig.__init__(self, **kwargs)``, reached by ``super().__init__``: each keyword an attribute."""
    if args:  # transformers' config takes keywords only
        this.update({key: UNKNOWN for key in named})
        if isinstance(this, ConfigObject):
            this.open = True
        return
    this.update(named)


def method(config: ConfigObject, name: str, args: list[Any]) -> tuple[bool, Any]:
    """A method of a config object called: (whether it is one played here, its value)."""
    if name == "to_dict" and not args:
        return True, {key: dict(value) if isinstance(value, ConfigObject) else value for key, value in config.items()
                      if key != CLASS}
    if name == "get_text_config" and not args:
        return True, config.get("text_config", config)
    if name == "update" and len(args) == 1:
        if isinstance(args[0], dict):
            config.update(args[0])
        else:  # updated from what is not known: none of its attributes is, and it may have more
            config.update({key: UNKNOWN for key in config if key != CLASS})
            config.open = True
        return True, None
    return False, None


def attribute(config: ConfigObject, name: str) -> Any:
    """An attribute the config does not hold: the default every config has, ABSENT where it has none, an Unknown
    where a statement not played may have set it."""
    if config.open:
        return Unknown(f"{name} (the config may have been given it where the scan did not follow)")
    return PRETRAINED_CONFIG_DEFAULTS.get(name, ABSENT)

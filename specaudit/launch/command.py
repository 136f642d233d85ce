"""Read a launch command the way the engine reads it.

vLLM: ``vllm serve MODEL ...`` or ``python3 -m vllm.entrypoints.openai.api_server --model MODEL ...``, read as
its FlexibleArgumentParser does: option names take ``_`` or ``-``; ``--opt=value`` and ``--opt value``; a
dotted option (``--speculative-config.method eagle3``) sets one key of a JSON option.

SGLang: ``python3 -m sglang.launch_server --model-path MODEL ...`` or ``sglang serve ...``, read as its
argparse parser does: dashed names, the aliases it declares (``--model``, ``--tensor-parallel-size``,
``--speculative-draft-model``), ``--tp`` by argparse's prefix matching, and the algorithm upper-cased with
``NEXTN`` an alias of ``EAGLE``.

Either may follow ``VAR=value`` assignments.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.data import BOOLEAN, INTEGER, NUMBER, STRING, Field, check_fields
from ..core.engines import ENGINES, SGLANG, EngineProfile
from ..core.errors import SpecauditError

_FLAGS = {"--trust-remote-code", "--enforce-eager", "--enable-auto-tool-choice", "--disable-log-requests",
          "--disable-log-stats", "--enable-prefix-caching", "--no-enable-prefix-caching"}
_SHORT = {"-sc": "--speculative-config",  # vllm/engine/arg_utils.py, 0.20 and later
          "-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size",
          "-q": "--quantization"}
_JSON_OPTIONS = {"speculative-config", "hf-overrides", "compilation-config", "kv-transfer-config"}
_NAME = re.compile(r"(?<=--)[^.=]*")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class LaunchCommand:
    engine: str
    model: str | None
    speculative: dict[str, Any]  # method (lower case, as vLLM spells it), model (the drafter), and the rest
    options: dict[str, Any] = field(default_factory=dict)  # every option, as the engine names it
    env: dict[str, str] = field(default_factory=dict)  # the ``VAR=value`` words before the program


def parse_launch_command(argv: list[str]) -> LaunchCommand:
    words, assignments = strip_assignments(list(argv))
    env = dict(word.split("=", 1) for word in assignments)
    return replace(_parse_program(words), env=env)


def _parse_program(argv: list[str]) -> LaunchCommand:
    engine, args = _strip_program(argv)
    if engine == "sglang":
        return _sglang_command(args)
    options = _vllm_options(args)
    speculative = dict(options.get("speculative-config", {}))
    # vllm/engine/arg_utils.py (0.33): --spec-method, --spec-model and --spec-tokens fill the speculative config's
    # keys, and may not repeat one it sets.
    for flag, key in (("spec-method", "method"), ("spec-model", "model"), ("spec-tokens", "num_speculative_tokens")):
        if flag in options:
            if key in speculative:
                raise SpecauditError(f"--{flag} and --speculative-config['{key}'] are mutually exclusive")
            speculative[key] = _scalar(options[flag]) if key == "num_speculative_tokens" else options[flag]
    return LaunchCommand("vllm", options.get("model"), check_speculative(speculative), options)


# The fields of vLLM's SpeculativeConfig the scan and the player read, with the types its annotations give them
# (vllm/config/speculative.py, 0.11.0 to 0.34.0); null where one of those releases takes it for unset (0.11.0's
# num_speculative_tokens is SkipValidation[int], 0.34.0's parallel_drafting is bool | None).
SPECULATIVE_FIELDS: dict[str, Field] = {
    **{name: Field(STRING, nullable=True) for name in ("method", "model", "revision", "code_revision", "quantization")},
    **{name: Field(INTEGER, nullable=True) for name in ("num_speculative_tokens", "draft_tensor_parallel_size",
                                                        "tensor_parallel_size", "max_model_len", "prompt_lookup_max",
                                                        "prompt_lookup_min", "dspark_draft_topk")},
    "parallel_drafting": Field(BOOLEAN, nullable=True), "enforce_eager": Field(BOOLEAN, nullable=True),
    "disable_padded_drafter_batch": Field(BOOLEAN),
    **{name: Field(INTEGER) for name in ("suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests")},
    **{name: Field(NUMBER) for name in ("suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob")},
}


def check_speculative(config: dict[str, Any]) -> dict[str, Any]:
    """A speculative config whose fields have the types the engine requires (SPECULATIVE_FIELDS): a wrong one is bad
    input, not a launch to judge."""
    check_fields(config, SPECULATIVE_FIELDS, "speculative config")
    return config


def _vllm_options(args: list[str]) -> dict[str, Any]:
    """The options of a vLLM launch command, keyed by dashed option name (``model``, ``speculative-config``...)."""
    options: dict[str, Any] = {}
    if args and not args[0].startswith("-"):
        options["model"] = args.pop(0)  # `vllm serve MODEL`
    i = 0
    while i < len(args):
        arg = _SHORT.get(args[i], args[i])
        i += 1
        if not arg.startswith("--"):
            continue  # a stray positional: vLLM would refuse it, the gates do not depend on it
        key, has_value, value = arg[2:].partition("=")
        key = _NAME.sub(lambda m: m.group(0).replace("_", "-"), "--" + key, count=1)[2:]
        if not has_value:
            missing = i >= len(args) or args[i].startswith("--")
            if key in _JSON_OPTIONS and missing:
                raise SpecauditError(f"--{key} needs a value (a JSON object)")
            if arg in _FLAGS or "--" + key in _FLAGS or missing:
                options[key] = True
                continue
            value = args[i]
            i += 1
        head, dot, rest = key.partition(".")
        if dot:
            nested = options.setdefault(head, {})
            if not isinstance(nested, dict):
                raise SpecauditError(f"--{head} is given both as JSON and as --{key}")
            nested[rest.replace("-", "_")] = _scalar(value)
        elif key in _JSON_OPTIONS:
            options[key] = {**options.get(key, {}), **json_option(key, value)}
        else:
            options[key] = value
    return options


# SGLang's declared aliases, and `--tp`, which argparse takes as the unique prefix of --tp-size.
_SGLANG_ALIASES = {"model": "model_path", "tensor_parallel_size": "tp_size", "tp": "tp_size",
                   "speculative_draft_model": "speculative_draft_model_path"}
_SGLANG_FLAGS = {"trust_remote_code", "enable_dp_attention", "disable_overlap_schedule", "enable_mixed_chunk",
                 "skip_server_warmup", "enable_multi_layer_eagle", "disable_cuda_graph", "enable_torch_compile"}
_SGLANG_PATHS = {"model_path", "speculative_draft_model_path", "tokenizer_path"}


def speculative_arguments(engine: EngineProfile, speculative: dict[str, Any]) -> dict[str, Any]:
    """The server arguments a speculative config given as JSON (or by --draft) sets, where the engine takes it as
    arguments (SGLang): its algorithm, as the engine spells it, and its draft. A token count is not carried: SGLang's
    num_steps, topk and num_draft_tokens are set together or not at all."""
    names = dict(engine.speculative_arguments)
    arguments = {names[k]: v for k, v in speculative.items() if k in ("method", "model", "revision") and k in names
                 and v is not None}
    method = names.get("method")
    if method and isinstance(arguments.get(method), str):
        arguments[method] = arguments[method].upper()
    return arguments


def _sglang_command(args: list[str]) -> LaunchCommand:
    options: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--"):
            continue
        key, has_value, value = arg[2:].partition("=")
        key = key.replace("-", "_")
        key = _SGLANG_ALIASES.get(key, key)
        if not has_value:
            if key in _SGLANG_FLAGS or i >= len(args) or args[i].startswith("--"):
                options[key] = True
                continue
            value = args[i]
            i += 1
        options[key] = value if key in _SGLANG_PATHS else _scalar(value)
    # As given: SGLang's own resolution (NEXTN is EAGLE, ...) is read from the release (methods/).
    method = str(options.get("speculative_algorithm") or "").lower() or None
    # The drafter's revision: speculative_draft_model_revision (sglang/srt/managers/tp_worker.py reads it).
    speculative = {key: options.get(argument) for key, argument in SGLANG.speculative_arguments} | {"method": method}
    return LaunchCommand("sglang", options.get("model_path"), {k: v for k, v in speculative.items() if v}, options)


def strip_assignments(argv: list[str]) -> tuple[list[str], list[str]]:
    """The command without its leading ``VAR=value`` words, and those words."""
    cut = 0
    while cut < len(argv) and _ASSIGNMENT.match(argv[cut]):
        cut += 1
    return argv[cut:], argv[:cut]


def without_speculation(argv: list[str]) -> list[str]:
    """The same launch with no drafter: every ``--speculative...`` option dropped with its value (no option of
    either engine by that name is a flag)."""
    kept, i = [], 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word.startswith(("--speculative-", "--speculative_")):
            if "=" not in word and i < len(argv) and not argv[i].startswith("--"):
                i += 1  # its value
            continue
        kept.append(word)
    return kept


def _strip_program(args: list[str]) -> tuple[str, list[str]]:
    if not args:
        raise SpecauditError("empty launch command after --")
    program = os.path.basename(args[0])
    for engine in ENGINES.values():
        if program == engine.launch_program and len(args) > 1 and args[1] == "serve":
            return engine.name, args[2:]
        if re.match(r"^python[0-9.]*$", program) and len(args) > 2 and args[1] == "-m" and args[2] in engine.launch_modules:
            rest = args[3:]
            return engine.name, rest[1:] if args[2].endswith("cli.main") and rest[:1] == ["serve"] else rest
    raise SpecauditError(
        f"not a launch command specaudit knows: {' '.join(args[:3])} (expected `vllm serve MODEL ...`, "
        "`python3 -m vllm.entrypoints.openai.api_server ...` or `python3 -m sglang.launch_server ...`)"
    )


def json_option(key: str, value: str) -> dict[str, Any]:
    """A JSON-object option, as vLLM's json.loads type reads it."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise SpecauditError(f"--{key} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:  # an integer past Python's 4,300-digit limit
        raise SpecauditError(f"--{key}: {exc}") from None
    except RecursionError:
        raise SpecauditError(f"--{key}: JSON nested too deeply to be a config") from None
    if not isinstance(parsed, dict):
        raise SpecauditError(f"--{key} must be a JSON object")
    return parsed


def _scalar(value: str) -> Any:
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # not JSON: the word itself
        return value

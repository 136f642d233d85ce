"""Read a vLLM launch command the way vLLM's FlexibleArgumentParser reads it.

Accepted forms: ``vllm serve MODEL ...`` and ``python3 -m vllm.entrypoints.openai.api_server --model MODEL ...``,
optionally preceded by ``VAR=value`` assignments. Option names take ``_`` or ``-``; ``--opt=value`` and
``--opt value``; a dotted option (``--speculative-config.method eagle3``) sets one key of a JSON option.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .errors import SpecauditError

_ENTRYPOINTS = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server", "vllm.entrypoints.cli.main")
_FLAGS = {"--trust-remote-code", "--enforce-eager", "--enable-auto-tool-choice", "--disable-log-requests",
          "--disable-log-stats", "--enable-prefix-caching", "--no-enable-prefix-caching"}
_SHORT = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size",
          "-q": "--quantization"}
_JSON_OPTIONS = {"speculative-config", "hf-overrides", "compilation-config", "kv-transfer-config"}
_NAME = re.compile(r"(?<=--)[^.=]*")


def parse_vllm_command(argv: list[str]) -> dict[str, Any]:
    """The options of a vLLM launch command, keyed by dashed option name (``model``, ``speculative-config``...)."""
    args = _strip_program(list(argv))
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
            if arg in _FLAGS or "--" + key in _FLAGS or i >= len(args) or args[i].startswith("--"):
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


def _strip_program(args: list[str]) -> list[str]:
    while args and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", args[0]):
        args.pop(0)  # VAR=value before the program
    if not args:
        raise SpecauditError("empty launch command after --")
    program = os.path.basename(args[0])
    if program == "vllm" and len(args) > 1 and args[1] == "serve":
        return args[2:]
    if re.match(r"^python[0-9.]*$", program) and len(args) > 2 and args[1] == "-m" and args[2] in _ENTRYPOINTS:
        rest = args[3:]
        return rest[1:] if args[2] == "vllm.entrypoints.cli.main" and rest[:1] == ["serve"] else rest
    raise SpecauditError(
        f"not a vLLM launch command: {' '.join(args[:3])} "
        "(expected `vllm serve MODEL ...` or `python3 -m vllm.entrypoints.openai.api_server ...`)"
    )


def json_option(key: str, value: str) -> dict[str, Any]:
    """A JSON-object option, as vLLM's json.loads type reads it."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise SpecauditError(f"--{key} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(parsed, dict):
        raise SpecauditError(f"--{key} must be a JSON object")
    return parsed


def _scalar(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value

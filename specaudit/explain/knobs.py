"""A guard's names as what a launch sets: a flag, a key of ``--speculative-config``, a key of a checkpoint's
``config.json``, an environment variable. The flags are the fields of the release's own argument classes
(vLLM's ``EngineArgs`` and ``SpeculativeConfig``, SGLang's ``ServerArgs``), read from its source with the
templates; a name that is none of these is no knob, and its remedy is not offered as a fix.
"""

from __future__ import annotations

import re

_CALLED_ENV = re.compile(r"""^os\.(?:getenv|environ\.get)\(\s*['"](?P<name>\w+)['"]""")
_ENV = re.compile(r"^(?:VLLM|SGLANG|SGL)_[A-Z0-9_]+$")
_CHECKPOINT = ("hf_config", "hf_text_config", "text_config")


def knob_of(name: str, function: str, fields: dict[str, frozenset[str]]) -> str | None:
    """What ``name`` (a guard's expression, read in ``function``) is to the person launching, in words."""
    called = _CALLED_ENV.match(name)
    if called:
        return f"the environment variable {called['name']}"
    parts = name.split(".")
    tail = parts[-1]
    if _ENV.match(tail):
        return f"the environment variable {tail}"
    checkpoint = next((i for i, p in enumerate(parts) if p in _CHECKPOINT), None)
    if checkpoint is not None and checkpoint < len(parts) - 1:
        whose = "the drafter's" if any("draft" in p for p in parts[:checkpoint]) else "the model's"
        return f"`{tail}` in {whose} config.json"
    speculative = fields.get("SpeculativeConfig", frozenset())
    in_speculative = parts[0] == "self" and function.startswith("SpeculativeConfig.") or \
        "speculative_config" in parts[:-1]
    if in_speculative and tail in speculative and not tail.endswith("_config"):  # a *_config: the engine's to set
        return f'--speculative-config key "{tail}"'
    if tail in fields.get("EngineArgs", frozenset()) | fields.get("ServerArgs", frozenset()) and \
            _of_the_launch(parts, function):
        return "--" + tail.replace("_", "-")
    return None


def _of_the_launch(parts: list[str], function: str) -> bool:
    """Whether the name is read off the launch's configuration (``self`` of a config or arguments class, or a bare
    name in one's method: a parameter it is handed, ``adjust_sizes(self, tensor_parallel_size)``; a
    ``*_config`` or ``*args`` object, SGLang's hooks' ``cfg``), not off a kernel's or a layer's own attribute of the
    same name. A speculative flag's name on ``self`` of any class is the flag: the workers copy them from the
    arguments (SGLang's ``self.speculative_num_steps = server_args.speculative_num_steps``), and no layer has one."""
    owner = function.partition(".")[0] if parts[0] == "self" or len(parts) == 1 and "." in function else ""
    return owner.endswith(("Config", "Args")) or parts[0] == "cfg" or \
        any(p.endswith(("_config", "args")) for p in parts[:-1]) or \
        len(parts) == 2 and parts[0] == "self" and parts[1].startswith(_SPECULATIVE)


_SPECULATIVE = ("speculative_", "num_speculative_")  # the names of speculative flags, whoever holds them


# A knob the message itself tells to change: an environment variable set to a value ("Set VLLM_USE_V1=0"), a flag
# ("--max-model-len"), or a flag's name as the message spells it ("adjust num_speculative_tokens").
_SAID_ENV = re.compile(r"\b(?P<name>(?:VLLM|SGLANG|SGL)_[A-Z0-9_]+)(?:=(?P<value>[\w.-]*\w))?")
_SAID_FLAG = re.compile(r"(?<![\w-])--(?P<flag>[a-z][a-z0-9]*(?:-[a-z0-9]+)+)(?:[= ](?P<value>\w[\w.-]*))?")
_SAID_NAME = re.compile(r"\b(?P<name>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")


def said_knobs(text: str, fields: dict[str, frozenset[str]]) -> list[tuple[str, str]]:
    """(knob, value) for each knob a message's own words name as its remedy, in order; the value where the message
    gives one ("Set VLLM_USE_V1=0"), else "". A name is a knob only where it is a field of the release's argument
    classes (or an environment variable of the engines'), as knob_of judges a guard's."""
    found: dict[str, str] = {}
    for env in _SAID_ENV.finditer(text):
        found.setdefault(f"the environment variable {env['name']}", env["value"] or "")
    flags = fields.get("EngineArgs", frozenset()) | fields.get("ServerArgs", frozenset())
    speculative = fields.get("SpeculativeConfig", frozenset())
    for flag in _SAID_FLAG.finditer(text):
        name = flag["flag"].replace("-", "_")
        if name in flags:
            found.setdefault("--" + flag["flag"], flag["value"] or "")
    for word in _SAID_NAME.finditer(text):
        name, bound = word["name"], _bound(text[word.end():word.end() + 24], text)
        if name in speculative and name not in flags and not name.endswith("_config"):
            found.setdefault(f'--speculative-config key "{name}"', bound)
        elif name in flags and len(name) >= 8:
            found.setdefault("--" + name.replace("_", "-"), bound)
    return list(found.items())


# A verb that tells the reader what to do: the knobs named after it, in its sentence, are the message's advice.
_ADVICE = re.compile(r"\b(?:increase|decrease|reduce|raise|lower|set|use|pass|specify|enable|disable|adjust|change|"
                     r"try|consider)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?](?=\s|$)|$)")


def advised_knobs(text: str, fields: dict[str, frozenset[str]]) -> list[tuple[str, str]]:
    """The knobs a message advises changing: ``said_knobs`` of what follows an advice verb in its sentence
    ("Increase max_num_batched_tokens ..., or decrease num_speculative_tokens"), not a knob it only mentions ("was
    not provided", "only supports")."""
    found: dict[str, str] = {}
    for sentence in _SENTENCE.findall(text):
        verb = _ADVICE.search(sentence)
        if verb is not None:
            for knob, value in said_knobs(sentence[verb.start():], fields):
                found.setdefault(knob, value)
    return list(found.items())


# "X > 1 is not supported": the message states the value it refuses, so the fix is the other side of it.
_STATED = re.compile(r"^\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>-?\d+)\b")
_REFUSED = re.compile(r"\b(?:not (?:yet )?supported|unsupported|cannot|can't|must not|not allowed)\b", re.IGNORECASE)
_OTHER_SIDE = {">": "at most {}", ">=": "below {}", "<": "at least {}", "<=": "above {}", "==": "other than {}",
               "!=": "{}"}


def _bound(after: str, text: str) -> str:
    """The value a message refuses right after a knob's name ("cp_kv_cache_interleave_size > 1 is not
    supported"), turned into the fix ("at most 1"); "" where it states none."""
    stated = _STATED.match(after)
    if stated is None or not _REFUSED.search(text):
        return ""
    return _OTHER_SIDE[stated["op"]].format(stated["value"])

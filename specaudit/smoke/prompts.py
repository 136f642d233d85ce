"""The prompts smoke sends, by kind. Published acceptance figures are per kind of prompt (chat, code, maths: a code or
maths answer is more predictable than a conversation, and a healthy drafter accepts more of it), so smoke's own
prompts carry their kind and its acceptance is reported per kind (``Acceptance.by_kind``), to be held against the
drafter's twin of that kind (metrics.expected).

``--prompts chat|code|maths|all`` (or several kinds joined by commas) takes the bundled set (``prompts.yaml`` here);
``--prompts FILE`` a file of the user's: YAML or JSON, a mapping of kind to a list of prompts (or a bare list, of no
kind), or text, one prompt a line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from ..core.data import YAML_LOADER
from ..core.errors import SpecauditError

KINDS = ("chat", "code", "maths")  # the kinds the bundled set has, and the published twins name
MAX_FILE_BYTES = 1_000_000  # a prompt file is kilobytes
MAX_PROMPTS = 1000
MAX_PROMPT_CHARS = 20_000


@dataclass(frozen=True)
class Prompt:
    text: str
    kind: str = ""  # chat, code, maths, a kind of the user's file; "" for a prompt of no kind (--prompt)


def bundled(kind: str) -> tuple[Prompt, ...]:
    """The bundled prompts of one kind."""
    text = (resources.files("specaudit.smoke") / "prompts.yaml").read_text(encoding="utf-8")
    return tuple(Prompt(p, kind) for p in yaml.load(text, Loader=YAML_LOADER)[kind])


def load_prompts(spec: str) -> tuple[Prompt, ...]:
    """What ``--prompts`` names: a bundled kind, several joined by commas, ``all``, or a file."""
    names = [name.strip().lower() for name in spec.split(",")]
    if names == ["all"]:
        names = list(KINDS)
    if all(name in KINDS for name in names):
        return tuple(p for name in dict.fromkeys(names) for p in bundled(name))
    path = Path(spec).expanduser()
    if not path.is_file():
        raise SpecauditError(f"--prompts {spec}: neither {', '.join(KINDS)}, all, nor a file")
    return read_prompt_file(path)


def read_prompt_file(path: Path) -> tuple[Prompt, ...]:
    """A user's prompt file: YAML or JSON (kind -> prompts, or a list), else text with one prompt a line (blank lines
    and lines starting with # skipped)."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise SpecauditError(f"{path}: a prompt file of more than {MAX_FILE_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecauditError(f"{path}: not UTF-8 text") from None
    prompts: list[Prompt] = []
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        try:
            data = json.loads(text) if path.suffix.lower() == ".json" else yaml.load(text, Loader=YAML_LOADER)
        except (ValueError, yaml.YAMLError) as exc:
            raise SpecauditError(f"{path}: not valid {path.suffix[1:].upper()} ({str(exc).splitlines()[0]})") from None
        except RecursionError:
            raise SpecauditError(f"{path}: nested too deeply to be a prompt file") from None
        groups = data.items() if isinstance(data, dict) else [("", data)]
        for kind, items in groups:
            if not isinstance(kind, str) or not isinstance(items, list) \
                    or not all(isinstance(p, str) and p.strip() for p in items):
                raise SpecauditError(f"{path}: expected a mapping of kind to a list of prompts (non-empty strings), "
                                     "or a list of prompts")
            prompts += [Prompt(p, kind.strip().lower()) for p in items]
    else:
        prompts = [Prompt(line) for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not prompts:
        raise SpecauditError(f"{path}: no prompts in it")
    if len(prompts) > MAX_PROMPTS or any(len(p.text) > MAX_PROMPT_CHARS for p in prompts):
        raise SpecauditError(f"{path}: at most {MAX_PROMPTS} prompts of at most {MAX_PROMPT_CHARS} characters each")
    return tuple(prompts)


def by_kind(prompts: tuple[Prompt, ...] | list[Prompt]) -> list[tuple[str, list[str]]]:
    """The prompts grouped by kind, the kinds in the order they first appear (those of no kind: kind "")."""
    groups: dict[str, list[str]] = {}
    for prompt in prompts:
        groups.setdefault(prompt.kind, []).append(prompt.text)
    return list(groups.items())

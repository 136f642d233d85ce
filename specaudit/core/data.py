"""Where specaudit's own data lives: rules/ and patches/, and how their YAML is read; and JSON from input (a config, a
launch option, a patch state, a node's answer) read with every way it can be wrong one error."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import FieldTypeError, SpecauditError

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader where PyYAML has it


def read_yaml(path: Path) -> Any:
    """A data file's YAML, parsed once a process for as long as the file is unchanged (a scan asks for its path file
    at every stage). The value is shared: callers build their own objects from it and never change it. OSError and
    yaml.YAMLError are the caller's to word."""
    st = os.stat(path)
    return _parsed_yaml(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _parsed_yaml(path: str, mtime_ns: int, size: int) -> Any:
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=YAML_LOADER)


def parse_json(text: str | bytes, what: str) -> Any:
    """``text`` as JSON, or a SpecauditError naming ``what`` and why it is not: not JSON, not UTF-8, an integer past
    Python's 4,300-digit limit (ValueError), or nested past the parser's reach (RecursionError, which no caller of
    ``json.loads`` expects)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecauditError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # UnicodeDecodeError, or an integer past the digit limit
        raise SpecauditError(f"{what}: not valid JSON ({exc})") from None
    except RecursionError:
        raise SpecauditError(f"{what}: JSON nested too deeply to be read") from None


@dataclass(frozen=True)
class Kind:
    """A type a field of JSON must have: what a message calls it, and the test of a value."""

    name: str
    accepts: Callable[[Any], bool]


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON's true is no count


INTEGER = Kind("an integer", _integer)
NUMBER = Kind("a number", lambda v: _integer(v) or isinstance(v, float))
STRING = Kind("a string", lambda v: isinstance(v, str))
BOOLEAN = Kind("true or false", lambda v: isinstance(v, bool))
OBJECT = Kind("a JSON object", lambda v: isinstance(v, dict))
STRINGS = Kind("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
INTEGERS = Kind("a list of integers", lambda v: isinstance(v, list) and all(_integer(x) for x in v))


@dataclass(frozen=True)
class Field:
    kind: Kind
    nullable: bool = False  # null stands for unset, as its reader (the engine, transformers) takes it


def check_fields(data: Mapping[str, Any], fields: Mapping[str, Field], source: str, prefix: str = "") -> None:
    """Each of ``fields`` that ``data`` holds has its type, or a FieldTypeError names the first that has not; a field
    not there is its reader's to default."""
    for name, field in fields.items():
        value = data.get(name)
        if name in data and not (value is None and field.nullable or value is not None and field.kind.accepts(value)):
            raise FieldTypeError(source, prefix + name, field.kind.name + (" or null" if field.nullable else ""), value)


def data_dir(name: str) -> Path:
    """A data directory (rules/, patches/): installed copies live in the package, a source checkout keeps
    them at the repository root."""
    package = Path(__file__).parent.parent
    for candidate in (package / name, package.parent / name):
        if candidate.is_dir():
            return candidate
    raise SpecauditError(f"specaudit's {name}/ directory is missing from this installation")


def rules_dir() -> Path:
    return data_dir("rules")

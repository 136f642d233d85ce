"""Where specaudit's own data lives: rules/ and patches/, and how their YAML is read; and JSON from input (a config, a
launch option, a patch state, a node's answer) read with every way it can be wrong one error."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecauditError

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

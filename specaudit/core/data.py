"""Where specaudit's own data lives: rules/ and patches/, and how their YAML is read."""

from __future__ import annotations

from pathlib import Path

import yaml

from .errors import SpecauditError

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader where PyYAML has it


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

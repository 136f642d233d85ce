"""Where specaudit keeps downloaded trees and index caches."""

from __future__ import annotations

import os
import re
from pathlib import Path


def cache_dir(*parts: str, create: bool = True) -> Path:
    """The user cache (``$SPECAUDIT_CACHE``, else ``$XDG_CACHE_HOME/specaudit``), created on demand (a reader that
    only looks passes ``create=False``)."""
    base = os.environ.get("SPECAUDIT_CACHE")
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specaudit"
    path = root.joinpath(*parts)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def slug(text: str) -> str:
    """``text`` as one safe file-name component: runs of other characters become ``-``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")

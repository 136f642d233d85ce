"""Where specaudit keeps downloaded trees and index caches."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def staged_tree(dest: Path, source: str) -> Iterator[Path]:
    """A fresh staging directory beside ``dest`` to fill. When the block completes, it is marked complete
    (``.complete`` names ``source``) and renamed to ``dest`` in one step, replacing what was there; when the block
    raises, it is removed and ``dest`` is untouched. A half-written tree is never seen."""
    staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=dest.parent))
    try:
        yield staging
        (staging / ".complete").write_text(source + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)

"""Where specaudit keeps downloaded trees and index caches, and how it writes anything: names built from input made
safe in one place (``slug``), every path checked to lie where it was meant (``inside``), every file written whole
through a file of its own making (``write_atomic``)."""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import SpecauditError


def cache_dir(*parts: str, create: bool = True) -> Path:
    """The user cache (``$SPECAUDIT_CACHE``, else ``$XDG_CACHE_HOME/specaudit``), created on demand (a reader that
    only looks passes ``create=False``). Where it is read-only (``docker run --read-only``), what can be made again
    (trees, indexes) goes to a private directory removed at exit, said once on stderr; the patch state, which
    holds the pristine copies, cannot, and a cache that is not a directory is bad input."""
    base = os.environ.get("SPECAUDIT_CACHE")
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specaudit"
    path = root.joinpath(*parts)
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and parts[:1] != ("patches",):
                path = _private_cache(root, exc).joinpath(*parts)
                path.mkdir(parents=True, exist_ok=True)
            else:
                raise SpecauditError(f"the cache {root} ($SPECAUDIT_CACHE, else ~/.cache/specaudit) cannot hold "
                                     f"{'/'.join(parts) or 'anything'}: {exc.strerror}") from None
    return path


_private: list[Path] = []


def _private_cache(root: Path, exc: OSError) -> Path:
    """This process's own cache, made once, removed at exit."""
    if not _private:
        import atexit
        import sys

        _private.append(Path(tempfile.mkdtemp(prefix="specaudit-cache-")))
        atexit.register(shutil.rmtree, _private[0], True)
        sys.stderr.write(f"specaudit: warning: the cache {root} cannot be written ({exc.strerror}): working "
                         f"without it (releases are fetched again, trees indexed again)\n")
    return _private[0]


def slug(text: str) -> str:
    """``text`` (a version, a target, a host: anything a name is built from) as one safe file-name component: runs
    of other characters become ``-``, and no component is ``.`` or ``..``."""
    safe = re.sub(r"\.{2,}", "-", re.sub(r"[^A-Za-z0-9_.-]+", "-", text))
    return re.sub(r"-{2,}", "-", safe).strip(".-") or "-"


def inside(base: Path, path: Path) -> Path:
    """``path``, which must lie under ``base`` once both are resolved (symlinks in its directories followed, the last
    component not): a name built from input that would reach elsewhere is refused, never written."""
    real_base = base.resolve()
    real = path.parent.resolve() / path.name
    if path.name in ("", ".", "..") or real == real_base or not real.is_relative_to(real_base):
        raise SpecauditError(f"{path}: outside {base}, where specaudit writes it; refused")
    return path


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` written whole or not at all, through a temporary file created anew beside it (O_EXCL, a random name:
    never a file or symlink someone planted) and renamed over it (a symlink at ``path`` is replaced, not followed).
    An existing file keeps its mode; a new one gets the umask's."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".specaudit-tmp", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.is_file() and not path.is_symlink():
            shutil.copymode(path, tmp)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def staged_tree(dest: Path, source: str) -> Iterator[Path]:
    """A fresh staging directory beside ``dest`` to fill. When the block completes, it is marked complete
    (``.complete`` names ``source``) and renamed to ``dest`` in one step; when the block raises, it is removed and
    ``dest`` is untouched. A half-written tree is never seen, and a tree another process may be reading is never
    removed: where another process published ``dest`` first, its tree stands and this one is dropped (both hold
    the same release); only a ``dest`` left incomplete by an older specaudit is moved aside, then replaced."""
    staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=dest.parent))
    try:
        yield staging
        (staging / ".complete").write_text(source + "\n")
        try:
            os.rename(staging, dest)  # atomic; refused where dest is a directory with something in it
        except OSError:
            if not (dest / ".complete").exists():
                aside = Path(tempfile.mkdtemp(prefix=f".stale-{dest.name}-", dir=dest.parent))
                os.rename(dest, aside / dest.name)
                os.rename(staging, dest)
                shutil.rmtree(aside, ignore_errors=True)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)

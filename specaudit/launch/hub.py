"""Where a model argument points, resolved as the engines resolve it.

A local directory first; else a Hugging Face Hub id (``org/name``) at a revision, read through ``huggingface_hub``,
the engines' own dependency: the local Hub cache first (``HF_HUB_CACHE`` / ``HF_HOME``, ``HF_HUB_OFFLINE`` and the
revision's ref honoured, as ``try_to_load_from_cache`` reads them), then, online, ``config.json`` alone, with the
token where ``huggingface_hub`` looks for it (``HF_TOKEN``, the saved login). Weights are never fetched.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import SpecauditError

# What the Hub accepts as a repository id: a namespace and a name (huggingface_hub's validate_repo_id).
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")


@dataclass(frozen=True)
class ModelSource:
    """A model as the user named it, and where its config.json was found."""

    written: str  # the directory or Hub id, as written
    revision: str | None
    where: str  # in words: a local directory, the Hub cache's snapshot, the Hub
    directory: Path  # the directory that holds config.json

    @property
    def label(self) -> str:
        return f"{self.written}@{self.revision}" if self.revision else self.written


def cache_dir() -> Path:
    """The Hub cache as huggingface_hub finds it (HF_HUB_CACHE, HF_HOME/hub, the XDG or home default), without
    importing it: a preset's check costs nothing where no cache holds its repository."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface"
    return Path(home).expanduser() / "hub"


def cached_config(repo: str) -> tuple[Path, dict] | None:
    """The config.json of ``repo`` at its main ref in the local Hub cache, read without the network."""
    if not (cache_dir() / f"models--{repo.replace('/', '--')}").is_dir():
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, "config.json")
    if not isinstance(found, str):
        return None
    try:
        config = json.loads(Path(found).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return (Path(found), config) if isinstance(config, dict) else None


def is_hub_id(name: str) -> bool:
    """``org/name`` that is not a path on this machine (the engines try the directory first too)."""
    return bool(HUB_ID.match(name)) and not Path(name).expanduser().exists()


def resolve_model(name: str, revision: str | None = None) -> ModelSource:
    """Where ``name`` at ``revision`` is: a directory (where the engines ignore the revision too), the Hub cache, or
    the Hub, whose refusals are one line each."""
    if not is_hub_id(name):
        return ModelSource(name, None, "a local directory", Path(name).expanduser())
    from huggingface_hub import constants

    config, cached = hub_file(name, "config.json", revision)
    where = f"the Hub cache ({config.parent})" if cached else \
        f"the Hub ({constants.ENDPOINT}); config.json now cached in {config.parent}"
    return ModelSource(name, revision, where, config.parent)


def hub_file(name: str, filename: str, revision: str | None) -> tuple[Path, bool]:
    """A small file of a Hub repository (config.json, an index) and whether it came from the cache; else it is
    fetched into the cache."""
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(name, filename, revision=revision)  # validates the name as the Hub does
        if isinstance(cached, str):
            return Path(cached), True
        return Path(hf_hub_download(name, filename, revision=revision)), False
    except Exception as exc:  # noqa: BLE001 - each refusal of the Hub's is one line; anything else propagates
        why = _refusal(exc, filename, revision, constants.HF_HUB_CACHE)
        if why is None:
            raise
        raise SpecauditError(f"{name}@{revision}: {why}" if revision else f"{name}: {why}") from None


def _refusal(exc: Exception, filename: str, revision: str | None, cache: str) -> str | None:
    """Why the Hub did not give ``filename``, in words; None for an error that is not a refusal."""
    from huggingface_hub import errors

    if isinstance(exc, errors.HFValidationError):  # `a/..`, `org/--x`: the local pattern admits what the Hub does not
        return f"not a model name the Hub takes ({exc})"
    if isinstance(exc, errors.GatedRepoError):
        return ("a gated repository this token has no access to (accept its terms on the Hub; the token comes from "
                "HF_TOKEN or the saved login)")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return "no such model repository on the Hub (or a private one this token cannot see)"
    if isinstance(exc, errors.RevisionNotFoundError):
        return f"the repository has no revision {revision!r} (a commit, branch or tag)"
    if isinstance(exc, errors.LocalEntryNotFoundError):
        return (f"not in the Hub cache ({cache}): {filename}, and the Hub cannot be reached (offline, or "
                "HF_HUB_OFFLINE=1)")
    if isinstance(exc, errors.EntryNotFoundError):
        return f"the repository has no {filename} at this revision"
    if isinstance(exc, (errors.HfHubHTTPError, OSError)):
        return f"the Hub could not be read for {filename} ({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]})"
    return None


class HubFile:
    """A file of a Hub repository, read by byte ranges (``Range`` requests, as ``get_safetensors_metadata`` makes
    them); where the server answers a range with the whole file, only the bytes asked for are read from the
    stream before it is closed. The token is the one ``huggingface_hub`` finds."""

    def __init__(self, repo: str, filename: str, revision: str | None):
        from huggingface_hub import hf_hub_url

        self.repo, self.filename, self.revision = repo, filename, revision
        self.name = hf_hub_url(repo, filename, revision=revision)
        self._size: int | None = None

    def size(self) -> int:
        if self._size is None:
            self.read(0, 1)
        assert self._size is not None  # read() sets it from the response headers, or raises
        return self._size

    def read(self, start: int, length: int) -> bytes:
        from huggingface_hub import get_session
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

        headers = {**build_hf_headers(), "Range": f"bytes={start}-{start + length - 1}"}
        try:
            with get_session().stream("GET", self.name, headers=headers, follow_redirects=True) as response:
                hf_raise_for_status(response)
                ranged = response.status_code == 206
                total = response.headers.get("Content-Range", "").rpartition("/")[2]
                whole = response.headers.get("Content-Length", "0")
                self._size = int(total) if ranged and total.isdigit() else int(whole) if whole.isdigit() else 0
                skip, data = 0 if ranged else start, bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) >= skip + length:
                        break  # a server that ignores ranges: stop reading, never the whole weights
                return bytes(data[skip:skip + length])
        except Exception as exc:  # noqa: BLE001 - the Hub's refusals are one line; anything else propagates
            why = _refusal(exc, self.filename, self.revision, "")
            if why is None:
                raise
            raise SpecauditError(f"{self.repo}: {why}") from None


def read_checkpoint_anywhere(name: str, revision: str | None = None):
    """A checkpoint (a drafter) named as the engine takes it: a directory, or a Hub id whose config.json and
    safetensors headers are read from the Hub cache when the weights are there, else by range requests (the
    index file, then a few KB of each shard: never the weights)."""
    from .checkpoint import INDEX_FILE, Checkpoint, read_checkpoint, read_config, read_header

    if not is_hub_id(name):
        return read_checkpoint(name)
    from huggingface_hub import constants

    source = resolve_model(name, revision)
    try:
        return read_checkpoint(str(source.directory))  # the weights are in the Hub cache: their headers are there
    except SpecauditError:
        if constants.HF_HUB_OFFLINE:
            raise SpecauditError(f"{source.label}: its safetensors are not in the Hub cache "
                                 f"({source.directory}), and HF_HUB_OFFLINE=1 forbids reading their headers") from None
    try:
        index = json.loads(hub_file(name, INDEX_FILE, revision)[0].read_text(encoding="utf-8"))
        shards = sorted(set(index["weight_map"].values()))
    except SpecauditError:
        shards = ["model.safetensors"]  # no index: one shard
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise SpecauditError(f"{source.label}: {INDEX_FILE} is not a safetensors index (no weight_map)") from None
    files = [HubFile(name, shard, revision) for shard in shards]
    tensors = {}
    for file in files:
        tensors.update(read_header(file))
    return Checkpoint(f"{source.label} ({source.where})", read_config(str(source.directory)), tensors,
                      {file.name: file for file in files})

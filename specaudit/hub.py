"""Stage 0 of a target: where a model argument points, resolved as the engines resolve it.

A local directory first; else a Hugging Face Hub id (``org/name``) at a revision, read through ``huggingface_hub``,
the engines' own dependency: the local Hub cache first (``HF_HUB_CACHE`` / ``HF_HOME``, ``HF_HUB_OFFLINE`` and the
revision's ref honoured, as ``try_to_load_from_cache`` reads them), then, online, ``config.json`` alone, with the
token where ``huggingface_hub`` looks for it (``HF_TOKEN``, the saved login). Weights are never fetched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import SpecauditError

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


def is_hub_id(name: str) -> bool:
    """``org/name`` that is not a path on this machine (the engines try the directory first too)."""
    return bool(HUB_ID.match(name)) and not Path(name).expanduser().exists()


def resolve_model(name: str, revision: str | None = None) -> ModelSource:
    if not is_hub_id(name):
        if revision:
            raise SpecauditError(f"{name}: a revision ({revision}) names a Hub commit, branch or tag, not a directory")
        return ModelSource(name, None, "a local directory", Path(name).expanduser())
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache

    cached = try_to_load_from_cache(name, "config.json", revision=revision)
    if isinstance(cached, str):
        return ModelSource(name, revision, f"the Hub cache ({Path(cached).parent})", Path(cached).parent)
    try:
        file = Path(hf_hub_download(name, "config.json", revision=revision))
    except Exception as exc:  # noqa: BLE001 - each refusal of the Hub's is one line; anything else propagates
        why = _refusal(exc, revision, constants.HF_HUB_CACHE)
        if why is None:
            raise
        raise SpecauditError(f"{name}@{revision}: {why}" if revision else f"{name}: {why}") from None
    return ModelSource(name, revision, f"the Hub ({constants.ENDPOINT}); config.json now cached in {file.parent}",
                       file.parent)


def _refusal(exc: Exception, revision: str | None, cache: str) -> str | None:
    """Why the Hub did not give config.json, in words; None for an error that is not a refusal."""
    from huggingface_hub import errors

    if isinstance(exc, errors.GatedRepoError):
        return ("a gated repository this token has no access to (accept its terms on the Hub; the token comes from "
                "HF_TOKEN or the saved login)")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return "no such model repository on the Hub (or a private one this token cannot see)"
    if isinstance(exc, errors.RevisionNotFoundError):
        return f"the repository has no revision {revision!r} (a commit, branch or tag)"
    if isinstance(exc, errors.LocalEntryNotFoundError):
        return f"not in the Hub cache ({cache}), and the Hub cannot be reached (offline, or HF_HUB_OFFLINE=1)"
    if isinstance(exc, errors.EntryNotFoundError):
        return "the repository has no config.json at this revision"
    if isinstance(exc, (errors.HfHubHTTPError, OSError)):
        return f"the Hub could not be read ({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]})"
    return None

"""The drafter's tokenizer against the target's. Neither engine compares them for an EAGLE head (vLLM checks
vocabularies only for draft_model, ``verify_equal_vocab_size_if_draft_model``; SGLang only for STANDALONE): a head
trained for another tokenizer loads and runs, and its token ids name other strings of the target's. Where both
checkpoints ship a ``tokenizer.json`` here, their vocabularies are compared id by id; where they do not, a drafter
config whose ``vocab_size`` differs from the target's is a question the files cannot answer (the same tokenizer padded
to another size loses nothing), never a failure: nothing in the engine refuses it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...core.types import Finding, Rule, Status
from .context import DraftContext, check, degrades, draft_finding, warns

TOKENIZER = "tokenizer.json"
MOSTLY_OTHER = 0.5  # a head whose ids name other strings for at least this share of its vocabulary helps no request


def _vocabulary(directory: str) -> dict[str, int] | None:
    """A tokenizer.json's tokens and their ids (its model's vocab and its added tokens); None where the checkpoint has
    none here, or it holds no vocabulary specaudit reads (a SentencePiece model only)."""
    path = Path(directory) / TOKENIZER if directory else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    vocab = (data.get("model") or {}).get("vocab")
    if isinstance(vocab, list):  # Unigram: [token, score] pairs, the id their index
        vocab = {entry[0]: i for i, entry in enumerate(vocab) if isinstance(entry, list) and entry}
    if not isinstance(vocab, dict):
        return None
    added = {t["content"]: t["id"] for t in data.get("added_tokens") or () if isinstance(t, dict) and "content" in t}
    return {**vocab, **added}


@check("tokenizer_match")
def check_tokenizer_match(rule: Rule, ctx: DraftContext) -> Finding | None:
    target = ctx.launch.target
    mine = _vocabulary(ctx.draft.path) if not ctx.draft.sources else None  # a remote drafter's files are not here
    theirs = _vocabulary(target.directory) if target is not None else None
    if mine is not None and theirs is not None:
        return _compared(rule, ctx, mine, theirs)
    draft_size, target_size = ctx.draft_config.get("vocab_size"), ctx.target_text.get("vocab_size")
    if not isinstance(draft_size, int) or not isinstance(target_size, int) or draft_size == target_size:
        return None
    return draft_finding(rule, ctx, Status.UNDECIDED,
                         f"the drafter config's vocab_size is {draft_size}, the target's {target_size}, and the release "
                         "checks neither for this method: a head of another tokenizer runs and accepts almost nothing, "
                         "one of the same tokenizer padded to another size loses nothing; which it is cannot be told "
                         f"without both checkpoints' {TOKENIZER} here (specaudit smoke measures it)",
                         f"drafter vocab_size = {draft_size}; target vocab_size = {target_size}")


def _compared(rule: Rule, ctx: DraftContext, mine: dict[str, int], theirs: dict[str, int]) -> Finding:
    other = [token for token, i in mine.items() if theirs.get(token) != i]
    share = len(other) / len(mine) if mine else 0.0
    evidence = f"{TOKENIZER}: drafter {len(mine)} tokens, target {len(theirs)}; {len(other)} of the drafter's tokens " \
               f"have another id in the target's" + (f" (first: {other[0]!r})" if other else "")
    if not other:
        return draft_finding(rule, ctx, Status.PASSES, f"the drafter's {len(mine)} tokens have the target's ids",
                             evidence)
    why = f"the drafter's tokenizer is not the target's: {len(other)} of its {len(mine)} tokens ({share:.0%}) have " \
          "another id in the target's, and neither engine compares them for this method (no error)"
    if share >= MOSTLY_OTHER:
        return degrades(rule, ctx, why, "near zero: the head's ids name other strings of the target's vocabulary on "
                        "every request", evidence)
    return warns(rule, ctx, why, f"drafts of those {len(other)} tokens ({share:.0%} of the drafter's vocabulary) name "
                 "other tokens and are rejected; the rest draft as trained", evidence)

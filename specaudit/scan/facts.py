"""What the index knows of one module, and how one pass over its syntax tree extracts it: its classes (bases,
decorators, class-level members), its imports (aliases, relative imports, star imports, ``__all__``), module-level
aliases (``X = pkg.Y``) and module-level literals, with the branches taken for the launch's platform. Plain data,
pickled into the index cache; index.py builds and caches it for a whole tree.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..play.libraries.environ import declared_default
from ..tree.locate import installed_beside

# The try statements: `try: ... except*` (TryStar, Python 3.11) has the same blocks as a plain try.
if sys.version_info >= (3, 11):
    TRY_NODES: tuple[type[ast.Try] | type[ast.TryStar], ...] = (ast.Try, ast.TryStar)
else:
    TRY_NODES: tuple[type[ast.Try], ...] = (ast.Try,)


@dataclass(frozen=True)
class LiteralRef:
    """A module-level literal that refers to another name, e.g. the ``**_TEXT_MODELS`` in a merged dict."""

    name: str


@dataclass(frozen=True)
class Merge:
    """A dict or list literal built from parts: literal pieces and ``**name`` / ``*name`` spreads."""

    kind: str  # "dict" or "list"
    parts: tuple[Any, ...]


@dataclass(frozen=True)
class ClassInfo:
    module: str
    name: str
    line: int
    bases: tuple[str | None, ...]  # dotted names; None where the base is not a name (a call, ...)
    base_sources: tuple[str, ...]  # each base as written, for messages
    decorators: tuple[str, ...]
    bound: frozenset[str]  # names given a value in the class body: methods, assignments
    annotated: frozenset[str]  # names only annotated in the class body (no value)
    defaults: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)  # literal class attributes

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True)
class Factory:
    """A function that builds a class and returns it: ``def as_seq_cls_model(cls): class M(cls, ...): ...;
    return M``. ``made`` is that class as written, its bases naming the parameters."""

    params: tuple[str, ...]
    made: ClassInfo
    returns_argument: bool  # some branch returns a parameter unchanged (`if is_pooling_model(cls): return cls`)
    imports: dict[str, Import] = field(default_factory=dict)  # imports inside the function


@dataclass(frozen=True)
class Import:
    module: str  # absolute module name
    name: str | None  # None: the binding is the module itself


@dataclass
class ModuleInfo:
    name: str
    path: str  # relative to the tree root
    is_package: bool
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, Import] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # X = some.dotted.name
    name_lists: dict[str, tuple[str, ...]] = field(default_factory=dict)  # X = [A, pkg.B] (SGLang's EntryClass)
    literals: dict[str, Any] = field(default_factory=dict)
    literal_lines: dict[str, int] = field(default_factory=dict)  # line of each literal, alias and name list
    functions: set[str] = field(default_factory=set)
    factories: dict[str, Factory] = field(default_factory=dict)
    factory_calls: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # X = f(A, B): (f, (A, B))
    computed: dict[str, int] = field(default_factory=dict)  # names bound to a value computed at import: line
    declared_imports: dict[str, Import] = field(default_factory=dict)  # TYPE_CHECKING imports of a __getattr__ module
    all_names: tuple[str, ...] | None = None  # __all__, when it is a literal
    platform_branches: list[tuple[int, str]] = field(default_factory=list)  # platform dispatches: (line, branch)


class SyntaxProblem(Exception):
    pass


def module_name_for(relpath: str) -> str:
    parts = relpath[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parse(source: bytes, relpath: str) -> ast.Module:
    try:
        return ast.parse(source, filename=relpath)
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes
        line = getattr(exc, "lineno", None)
        raise SyntaxProblem(f"{type(exc).__name__} at line {line}: {getattr(exc, 'msg', exc)}") from None


def module_info(tree: ast.Module, relpath: str, platform: str = "cuda") -> ModuleInfo:
    name = module_name_for(relpath)
    info = ModuleInfo(name=name, path=relpath, is_package=relpath.endswith("__init__.py"))
    package = name if info.is_package else name.rpartition(".")[0]
    for stmt in flatten(tree.body, platform, info.platform_branches):
        _index_statement(stmt, info, package, platform)
    if "__getattr__" in info.functions:
        # A module __getattr__ (PEP 562) picks classes at run time, often per platform; the imports it
        # declares to type checkers say which ones it means.
        declared = ModuleInfo(name=info.name, path=relpath, is_package=info.is_package)
        for stmt in tree.body:
            if isinstance(stmt, ast.If) and dotted_name(stmt.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                for inner in flatten(stmt.body, platform):
                    _index_statement(inner, declared, package, platform)
        info.declared_imports = declared.imports
    return info


# What each platform a user can name answers true to, in a test like `current_platform.is_rocm()` or SGLang's
# `_is_hip`: `is_cuda_alike` holds on ROCm too.
PLATFORMS = {
    "cuda": {"cuda", "cuda_alike", "nvidia"},
    "rocm": {"rocm", "hip", "cuda_alike", "amd"},
    "xpu": {"xpu"},
    "cpu": {"cpu"},
    "tpu": {"tpu"},
    "npu": {"npu"},
    "hpu": {"hpu"},
}
_PLATFORM_NAMES = set().union(*PLATFORMS.values())


def platform_tested(test: ast.expr) -> set[str] | None:
    """The platforms a dispatch test names (``current_platform.is_rocm()``, ``is_hip()``, ``_is_cuda``, joined
    with ``or``); None when the test is anything else."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [platform_tested(v) for v in test.values]
        known = [p for p in parts if p is not None]
        return set().union(*known) if len(known) == len(parts) else None
    node = test.func if isinstance(test, ast.Call) and not test.args else test
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    tested = name.lstrip("_").removeprefix("is_")
    return {tested} if name.lstrip("_").startswith("is_") and tested in _PLATFORM_NAMES else None


def flatten(body: Iterable[ast.stmt], platform: str = "cuda",
             followed: list[tuple[int, str]] | None = None) -> Iterable[ast.stmt]:
    """Statements of a block, descending into if/try/with, where module-level names are often bound.

    A platform dispatch (`if current_platform.is_rocm(): ... elif ...: ... else: ...`) follows the one branch
    that runs on ``platform``, noted in ``followed`` as (line, branch). Other ifs yield every branch."""
    for stmt in body:
        if isinstance(stmt, ast.If) and platform_tested(stmt.test) is not None:
            branch, label = _platform_branch(stmt, platform)
            if followed is not None:
                followed.append((stmt.lineno, label))
            yield from flatten(branch, platform, followed)
        elif isinstance(stmt, ast.If):
            # A name bound in several branches keeps its first binding: the else branch goes first, as
            # it is the default branch of a dispatch the test of which is not a platform's.
            yield from flatten(stmt.orelse, platform, followed)
            # `if TYPE_CHECKING:` never runs: its names would shadow the ones the engine really binds.
            if dotted_name(stmt.test) not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                yield from flatten(stmt.body, platform, followed)
        elif isinstance(stmt, TRY_NODES):
            yield from flatten(stmt.body, platform, followed)
            for handler in stmt.handlers:
                yield from flatten(handler.body, platform, followed)
            yield from flatten(stmt.orelse, platform, followed)
            yield from flatten(stmt.finalbody, platform, followed)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from flatten(stmt.body, platform, followed)
        else:
            yield stmt


def definitions(tree: ast.Module, platform: str = "cuda") -> dict[str, ast.AST]:
    """A module's top-level functions and classes, and ``Class.method`` for methods, by qualified name, as the
    module binds them on ``platform``. A function defined several times (typing overloads) is its last, real
    definition."""
    defs: dict[str, ast.AST] = {}
    for stmt in flatten(tree.body, platform):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(stmt.name, stmt)
        elif isinstance(stmt, ast.ClassDef):
            defs.setdefault(stmt.name, stmt)
            for inner in flatten(stmt.body, platform):
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_overload(inner):
                    defs[f"{stmt.name}.{inner.name}"] = inner
    for stmt in flatten(tree.body, platform):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_overload(stmt):
            defs[stmt.name] = stmt
    return defs


def is_overload(node: ast.AST) -> bool:
    return any((dotted_name(d) or "").rsplit(".", 1)[-1] == "overload" for d in getattr(node, "decorator_list", []))


def _platform_branch(stmt: ast.If, platform: str) -> tuple[list[ast.stmt], str]:
    """The branch of an if/elif chain on platforms that runs on ``platform``, and how to name it."""
    node: ast.If = stmt
    while True:
        tested = platform_tested(node.test)  # not None: the caller's test, and each elif followed, test platforms
        if tested is not None and tested & PLATFORMS[platform]:
            return node.body, f"`{ast.unparse(node.test)}`"
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) and platform_tested(node.orelse[0].test):
            node = node.orelse[0]
            continue
        return node.orelse, "the else branch" if node.orelse else "no branch"


def _index_statement(stmt: ast.stmt, info: ModuleInfo, package: str, platform: str) -> None:
    if isinstance(stmt, ast.ClassDef):
        info.classes.setdefault(stmt.name, _class_info(stmt, info.name, platform))
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        info.functions.add(stmt.name)
        factory = _factory(stmt, info.name, package, platform)
        if factory is not None:
            info.factories[stmt.name] = factory
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                info.imports.setdefault(alias.asname, Import(alias.name, None))
            else:
                top = alias.name.split(".")[0]
                info.imports.setdefault(top, Import(top, None))
    elif isinstance(stmt, ast.ImportFrom):
        source = absolute_module(stmt.module, stmt.level, package)
        for alias in stmt.names:
            if alias.name == "*":
                info.star_imports.append(source)
            else:
                info.imports.setdefault(alias.asname or alias.name, Import(source, alias.name))
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if stmt.value is None or len(targets) != 1 or not isinstance(targets[0], ast.Name):
            return
        target = targets[0].id
        dotted = dotted_name(stmt.value)
        if dotted is not None:
            info.aliases[target] = dotted
            info.literal_lines[target] = stmt.lineno
            return
        if isinstance(stmt.value, (ast.List, ast.Tuple)) and stmt.value.elts:
            names = [name for name in map(dotted_name, stmt.value.elts) if name]
            if len(names) == len(stmt.value.elts):
                info.name_lists[target] = tuple(names)
                info.literal_lines[target] = stmt.lineno
                return
        call = factory_call(stmt.value)
        if call is not None:
            info.factory_calls.setdefault(target, call)
            info.literal_lines[target] = stmt.lineno
            return
        value = literal_value(stmt.value)
        if value is not _NOT_LITERAL:
            info.literals[target] = value
            info.literal_lines[target] = stmt.lineno
            if target == "__all__" and isinstance(value, (list, tuple)):
                info.all_names = tuple(v for v in value if isinstance(v, str))
        else:
            info.computed.setdefault(target, stmt.lineno)


def absolute_module(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join(base + ([module] if module else []))


def _factory(function: ast.FunctionDef | ast.AsyncFunctionDef, module: str, package: str,
             platform: str) -> Factory | None:
    made = {stmt.name: stmt for stmt in flatten(function.body, platform) if isinstance(stmt, ast.ClassDef)}
    if not made:
        return None
    params = tuple(a.arg for a in function.args.posonlyargs + function.args.args)
    # Every return of the function itself (not of the methods it defines) gives the class it made or a parameter;
    # a function that may return anything else is no factory, and what it returns stays unknown.
    returned = [r.value.id if isinstance(r.value, ast.Name) else None for r in _own_returns(function)]
    if any(name not in made and name not in params for name in returned):
        return None
    classes = [made[name] for name in returned if name in made]
    if len({c.name for c in classes}) != 1:
        return None
    info = _class_info(classes[0], module, platform)
    info = replace(info, name=f"{function.name}.<locals>.{info.name}")
    local = ModuleInfo(name=module, path="", is_package=False)
    for stmt in ast.walk(function):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _index_statement(stmt, local, package, platform)
    return Factory(params, info, any(name in params for name in returned), local.imports)


def _own_returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterable[ast.Return]:
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def factory_call(node: ast.AST) -> tuple[str, tuple[str, ...]] | None:
    """``f(A, B)`` with names only, the shape of a class built by a factory; None for any other value."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    func = dotted_name(node.func)
    args = tuple(dotted_name(a) for a in node.args)
    if func is None or not args or not all(args):
        return None
    return func, args  # type: ignore[return-value]


def _class_info(node: ast.ClassDef, module: str, platform: str) -> ClassInfo:
    bound: set[str] = set()
    annotated: set[str] = set()
    defaults: dict[str, Any] = {}
    for stmt in flatten(node.body, platform):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = literal_value(stmt.value)
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and not isinstance(value, Merge) \
                    and value is not _NOT_LITERAL:
                defaults[targets[0].id] = value
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        bound.add(name.id)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            (bound if stmt.value is not None else annotated).add(stmt.target.id)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            bound.add(stmt.target.id)
    bases = []
    for base in node.bases:
        # Generic[T] and Protocol[T] name their class through the subscript.
        bases.append(dotted_name(base.value if isinstance(base, ast.Subscript) else base))
    decorators = tuple(
        d for d in (dotted_name(dec.func if isinstance(dec, ast.Call) else dec) for dec in node.decorator_list) if d
    )
    return ClassInfo(
        module=module,
        name=node.name,
        line=node.lineno,
        bases=tuple(bases),
        base_sources=tuple(ast.unparse(b) for b in node.bases),
        decorators=decorators,
        bound=frozenset(bound),
        annotated=frozenset(annotated - bound),
        defaults=defaults,
    )


def copy_tree(node: ast.AST) -> Any:
    """A deep copy of a syntax tree, for a rewrite that changes it in place: copy.deepcopy's generic protocol took
    a fifth of a cold vLLM scan's trace, for nodes whose fields are nodes, lists of them, and immutable values."""
    kind = type(node)
    copied = kind.__new__(kind)
    fields = copied.__dict__
    for name, value in node.__dict__.items():
        if isinstance(value, ast.AST):
            value = copy_tree(value)
        elif type(value) is list:
            value = [copy_tree(item) if isinstance(item, ast.AST) else item for item in value]
        fields[name] = value
    return copied


def dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted_name(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def raised_exception(node: ast.expr) -> tuple[str | None, str | None]:
    """A raise statement's exception: its type as written, and its message as a template ({expr} where a value goes)."""
    if isinstance(node, ast.Call):
        return dotted_name(node.func), message_template(node.args[0]) if node.args else None
    return dotted_name(node), None


def message_template(node: ast.expr) -> str | None:
    """A message as a template: its text, with {expr} where an f-string part or a concatenation puts a value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                out.append("{" + ast.unparse(part.value) + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = message_template(node.left), message_template(node.right)
        return left + right if left is not None and right is not None else None
    return None


_NOT_LITERAL = object()


MAX_FILE_BYTES = 8_000_000  # the largest engine module is under 1 MB; a file past this is not parsed


def literal_value(node: ast.AST) -> Any:
    """A literal's value; dict/list literals with ``**name``/``*name`` spreads become :class:`Merge`."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.Dict):
        parts: list[Any] = []
        for key, value in zip(node.keys, node.values):
            if key is None:
                name = dotted_name(value)
                if name is not None:
                    parts.append(LiteralRef(name))
                continue  # a computed spread (a comprehension): the literal parts still say something
            k, v = literal_value(key), literal_value(value)
            if k is _NOT_LITERAL or v is _NOT_LITERAL:
                continue  # a computed entry: the rest of the dict still says something
            parts.append({k: v})
        return Merge("dict", tuple(parts))
    if isinstance(node, (ast.List, ast.Tuple)):
        parts = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                name = dotted_name(element.value)
                if name is None:
                    return _NOT_LITERAL
                parts.append(LiteralRef(name))
            else:
                value = literal_value(element)
                if value is _NOT_LITERAL:
                    return _NOT_LITERAL
                parts.append([value])
        return Merge("list", tuple(parts))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitOr, ast.Add)):
        # {**a} | {...} and [..] + [..] merge the same way as spreads. A chain `a + b + c ...` is read as one
        # flat merge, without recursion: an engine file may chain hundreds of terms.
        op = type(node.op)
        operands: list[ast.expr] = []
        while isinstance(node, ast.BinOp) and isinstance(node.op, op):
            operands.append(node.right)
            node = node.left
        operands.append(node)
        parts = []
        for operand in reversed(operands):
            name = dotted_name(operand)
            term = LiteralRef(name) if name else literal_value(operand)
            if not isinstance(term, (list, tuple, dict, Merge, LiteralRef)):
                return _NOT_LITERAL  # a string or number sum, or a computed term
            parts.append(term)
        return Merge("dict" if op is ast.BitOr else "list", tuple(parts))
    return _NOT_LITERAL


class ReleaseModules:
    """The release's modules as the methods stage's player reads them (methods.resolve.ReleaseCode), from the
    tree's index (``module(name)``, ``syntax(path)``, ``note_read``, ``tree``): parsed by name, each read noted, and
    whether a module is installed beside the tree."""

    def __init__(self, index: Any, registry: Any = None):
        self.index = index
        self.registry = registry  # scan.registry's Registry, where the release's was read

    def model_class(self, architecture: str) -> str | None:
        """"module:Class" the release's model registry maps an architecture to."""
        entry = self.registry.lookup([architecture]) if self.registry is not None else None
        return f"{entry.module}:{entry.class_name}" if entry is not None else None

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        """What ``compute`` derives from the release's modules, kept in the tree's index (TreeIndex.memo)."""
        return self.index.memo(name, compute)

    def module_tree(self, name: str) -> tuple[ast.Module, str] | None:
        module = self.index.module(name)
        if module is None:
            return None
        try:
            tree = self.index.syntax(module.path)
        except (SyntaxProblem, OSError):
            return None
        self.index.note_read(module.path)
        return tree, module.path

    def environment(self, name: str) -> Callable[[str], tuple[bool, Any]] | None:
        """What module ``name`` declares of an environment variable: (declared, default), as
        play.libraries.environ.declared_default reads it; None where the tree has no such module, or it does not
        parse. Kept by the file's content digest: a warm scan neither parses nor walks vLLM's envs.py (120 KB, ~0.035
        s) for the variable or two the runner choice reads."""
        module = self.index.module(name)
        if module is None:
            return None
        self.index.note_read(module.path)

        def declared(variable: str) -> tuple[bool, Any]:
            try:
                return self.index.derived(module.path, f"environ:{variable}",
                                          functools.partial(declared_default, variable=variable))
            except (SyntaxProblem, OSError):  # indexed, then changed or gone since: as a module that does not parse
                return False, None

        return declared

    def installed(self, module: str) -> bool | None:
        return installed_beside(self.index.tree, module)

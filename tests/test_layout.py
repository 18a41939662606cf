"""The package's structural rules, read from its source with ``ast`` (nothing is imported).

- no alias module: a module whose body is only imports and ``__all__`` (``__init__`` and
  ``__main__`` excepted); a concept has one import path;
- the generic latent layer (``latent/{surrogates,relaxations,score_function,methods,polytope,
  networks}.py``) imports nothing from ``latent/categorical`` or ``latent/trees``;
- no private name (``_x``, not a dunder) is imported from a module of another package directory;
- no import cycle among the package's modules, counting the imports inside functions;
- no library file over 600 lines, no function over 60 code lines (the distinct line numbers of
  its body's AST nodes, its docstring and other string constants excepted).

Each rule is a function of a package directory, so that a test can show it flags a synthetic bad
package written to ``tmp_path``.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ebmclassifier"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60
GENERIC_LATENT = ("surrogates", "relaxations", "score_function", "methods", "polytope", "networks")


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the package directory ``root``."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """``(module, imported name or None, line)`` of every import in the file, lazy ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found += [(base, alias.name, node.lineno) for alias in node.names]
    return found


def _edges(root: Path) -> dict[str, set[str]]:
    """The modules of the package that each module imports (a submodule imported by name, else
    the module imported from)."""
    modules = _modules(root)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for base, imported, _ in _imports(name, path):
            full = f"{base}.{imported}" if imported else base
            target = full if full in modules else base
            if target in modules and target != name:
                edges[name].add(target)
    return edges


def alias_modules(root: Path) -> list[str]:
    """Modules whose body is only imports and ``__all__`` (besides docstrings)."""
    found = []
    for name, path in _modules(root).items():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        body = [
            statement
            for statement in ast.parse(path.read_text()).body
            if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        ]
        if all(
            isinstance(statement, ast.Import | ast.ImportFrom)
            or (
                isinstance(statement, ast.Assign)
                and any(getattr(t, "id", "") == "__all__" for t in statement.targets)
            )
            for statement in body
        ):
            found.append(name)
    return found


def generic_latent_imports(root: Path) -> list[str]:
    """Imports of ``latent/categorical`` or ``latent/trees`` by the generic latent layer."""
    prefix = f"{root.name}.latent."
    return [
        f"{name} -> {target}"
        for name, targets in _edges(root).items()
        if name.startswith(prefix) and name[len(prefix) :] in GENERIC_LATENT
        for target in sorted(targets)
        if target.startswith((prefix + "categorical", prefix + "trees"))
    ]


def private_imports(root: Path) -> list[str]:
    """``from module import _name`` where the module lies in another package directory."""
    modules = _modules(root)
    found = []
    for name, path in modules.items():
        for base, imported, line in _imports(name, path):
            if imported is None or not imported.startswith("_") or imported.startswith("__"):
                continue
            if base in modules and f"{base}.{imported}" not in modules:
                if modules[base].parent != path.parent:
                    found.append(f"{name}:{line} from {base} import {imported}")
    return found


def import_cycles(root: Path) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    edges = _edges(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in edges:
        if module not in index:
            visit(module)
    return cycles


def long_files(root: Path) -> list[str]:
    return [
        f"{name}: {n} lines"
        for name, path in _modules(root).items()
        if (n := len(path.read_text().splitlines())) > MAX_FILE_LINES
    ]


def code_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Distinct line numbers of the body's nodes, the docstring and string constants excepted."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            body = body[1:]
    lines = {
        node.lineno
        for statement in body
        for node in ast.walk(statement)
        if hasattr(node, "lineno")
        and not (isinstance(node, ast.Constant) and isinstance(node.value, str))
    }
    return len(lines)


def long_functions(root: Path) -> list[str]:
    return [
        f"{name}.{node.name} (line {node.lineno}): {code_lines(node)} code lines"
        for name, path in _modules(root).items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and code_lines(node) > MAX_FUNCTION_LINES
    ]


# ---------------------------------------------------------------- the package


def test_no_alias_modules():
    assert alias_modules(PACKAGE) == []


def test_generic_latent_layer_imports_no_structure():
    assert generic_latent_imports(PACKAGE) == []


def test_no_private_names_across_package_directories():
    assert private_imports(PACKAGE) == []


def test_no_import_cycles_counting_lazy_imports():
    assert import_cycles(PACKAGE) == []


def test_no_file_over_600_lines():
    assert long_files(PACKAGE) == []


def test_no_function_over_60_code_lines():
    assert long_functions(PACKAGE) == []


# ---------------------------------------------------------------- each rule can fail


def _write(root: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``root`` with ``files`` (relative path -> source)."""
    package = root / "pkg"
    for relative, source in {"__init__.py": "", **files}.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(source))
    return package


def test_the_checker_flags_an_alias_module(tmp_path):
    package = _write(
        tmp_path,
        {
            "core.py": "def f():\n    return 1\n",
            "old.py": '"""Old path."""\nfrom .core import f\n\n__all__ = ["f"]\n',
        },
    )
    assert alias_modules(package) == ["pkg.old"]


def test_the_checker_flags_the_generic_layer_importing_a_structure(tmp_path):
    package = _write(
        tmp_path,
        {
            "latent/trees/inference.py": "X = 1\n",
            "latent/categorical/simplex.py": "Y = 2\n",
            "latent/methods.py": "def f():\n    from .trees.inference import X\n    return X\n",
            "latent/polytope.py": "from .categorical import simplex\n",
            "latent/classifier.py": "from .trees.inference import X\n",  # not generic
        },
    )
    assert generic_latent_imports(package) == [
        "pkg.latent.methods -> pkg.latent.trees.inference",
        "pkg.latent.polytope -> pkg.latent.categorical.simplex",
    ]


def test_the_checker_flags_a_private_name_from_another_directory(tmp_path):
    package = _write(
        tmp_path,
        {
            "sub/tools.py": "def _helper():\n    return 1\n",
            "sub/user.py": "from .tools import _helper\n",  # same directory: allowed
            "top.py": "from .sub.tools import _helper\nfrom .sub import __doc__\n",
        },
    )
    assert private_imports(package) == ["pkg.top:1 from pkg.sub.tools import _helper"]


def test_the_checker_flags_a_cycle_through_a_lazy_import(tmp_path):
    package = _write(
        tmp_path,
        {
            "a.py": "from .b import g\n\ndef f():\n    return g()\n",
            "b.py": "def g():\n    from . import a\n    return a\n",
            "c.py": "from . import a\n",
        },
    )
    assert import_cycles(package) == [["pkg.a", "pkg.b"]]


def test_the_checker_flags_a_long_file_and_a_long_function(tmp_path):
    long_body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES + 1))
    docstring = '    """' + "A docstring line.\n" * 100 + '    """\n'
    short_body = docstring + "".join(f"    y{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    package = _write(
        tmp_path,
        {
            "big.py": "X = 1\n" * (MAX_FILE_LINES + 1),
            "fine.py": "X = 1\n" * MAX_FILE_LINES,
            "funcs.py": f"def long():\n{long_body}\n\ndef short():\n{short_body}",
        },
    )
    assert long_files(package) == [f"pkg.big: {MAX_FILE_LINES + 1} lines"]
    assert long_functions(package) == [
        f"pkg.funcs.long (line 1): {MAX_FUNCTION_LINES + 1} code lines"
    ]

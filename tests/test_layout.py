"""The package's structural rules, read from its source with ``ast`` (nothing is imported).

- no alias module: a module whose body is only imports and ``__all__`` (``__init__`` and
  ``__main__`` excepted); a concept has one import path;
- the generic latent layer (``latent/{surrogates,relaxations,score_function,methods,polytope,
  networks}.py``) imports nothing from ``latent/categorical`` or ``latent/trees``;
- no private name (``_x``, not a dunder) is imported from a module of another package directory;
- no import cycle among the package's modules, counting the imports inside functions;
- no library file over 400 code lines (lines holding code: docstrings, comments and blank
  lines do not count, so prose never pushes code out of its file) and no ``# fmt: skip``
  (no line packed to meet a count); no function over 60 code lines (the distinct line numbers
  of its body's AST nodes, its docstring and other string constants excepted);
- the functional core (``CORE``) reaches no scikit-learn or skorch, through any chain of the
  package's imports, lazy ones too;
- a wing's core is used by the faces in its own folder only (``WINGS``): a face over it sits
  beside it, not in the root;
- one home per name: no public function or class is defined at the top of two modules;
- one way of saving figures: only ``plotting.py`` calls ``savefig``;
- no benchmark or example imports a private name or a private module of the package;
- ``tests/`` mirrors the package: a test folder (with ``__init__.py``) per package folder, its
  files importing from it or named after one of its modules (``_estimator/test_repr.py``); no
  flat test file named after a package folder or a module that lives in one
  (``test_saving.py``, ``test_matfile.py``), only after a root module or a concern that crosses
  the package (``test_hostile_inputs.py``);
- the training capabilities are collaborators: in every estimator's MRO at most two classes
  of the package override skorch's training hooks (``HOOKS``), the engine and one estimator
  class, never a mixin; the bases of the face besides the engine are user-facing mixins
  (``USER_FACING``); no module reads a private attribute that only a training capability
  (``CAPABILITIES``) defines, other than that capability's own module;
- the random draws of a fit have one owner: no ``default_rng(``, ``SeedSequence(`` or
  arithmetic of a seed with a literal outside ``_utils/generators.py`` (``datasets/`` and
  ``experiments/`` draw their own data);
- no module docstring longer than 50 lines.

Each rule is a function of a package directory, so that a test can show it flags a synthetic bad
package written to ``tmp_path``.
"""

from __future__ import annotations

import ast
import functools
import io
import textwrap
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ebmclassifier"
MAX_CODE_LINES = 400
MAX_FUNCTION_LINES = 60
GENERIC_LATENT = ("surrogates", "relaxations", "score_function", "methods", "polytope", "networks")
#: The functional core, on tensors and arrays: modules (or package folders, with all below).
CORE = (
    "energy",
    "losses",
    "sampling",
    "compose.energies",
    "continual.output_layer",
    "continual.reservoir",
    "continual.generated",
    "distributional.posteriors",
    "distributional.calibration",
    "distributional.shift_test",
    *(f"latent.{name}" for name in GENERIC_LATENT),
    "latent.categorical.simplex",
    "latent.trees",
)
#: The estimators' libraries, which the core never reaches.
ESTIMATOR_LIBRARIES = ("sklearn", "skorch")
#: Each wing (a package folder holding a capability's core and its faces) and its core modules.
WINGS = {
    "compose": ("energies",),
    "distributional": ("posteriors", "shift_test"),
    "continual": ("output_layer", "reservoir", "generated"),
}
#: The one module that saves figures.
FIGURE_HOME = "plotting"
#: The tests, and the flat test files whose name meets a module in a folder by chance: they
#: test a concern of the whole package, not that module.
TESTS = Path(__file__).resolve().parent
CROSS_CUTTING = {
    # every public name's docstring, not the text that _utils/docstrings.py fills in
    "test_docstrings.py",
}
#: The training engine (the one class that overrides skorch's hooks for every estimator), the
#: face built on it, and the modules of the face's user-facing bases (scikit-learn's kind of
#: mixin: methods users call).
ENGINE = "_estimator.engine.TrainingEngine"
FACE = "_estimator.base.EBMClassifierBase"
USER_FACING = ("_estimator.inference", "_estimator.repr", "saving._files")
#: skorch's training hooks (and every ``on_*``, ``train_step*``).
HOOKS = ("initialize", "get_split_datasets", "save_params", "load_params", "handle_divergence")
#: The modules of the training capabilities: their private names are their own.
CAPABILITIES = (
    "_estimator.resume",
    "_estimator.checkpoint",
    "_estimator.early_stopping",
    "_estimator.training_loss_stopping",
    "_divergence",
    "_utils.precision",
    "continual._mixin",
)
#: The modules the capabilities plug into: their private names are hooks for all.
TEMPLATES = ("_estimator.engine", "_estimator.base")
#: The home of a fit's seeds and generators, and the folders that draw data of their own.
GENERATORS = "_utils.generators"
OWN_DRAWS = ("datasets", "experiments")
MAX_MODULE_DOCSTRING = 50


@functools.cache
def _parsed(path: Path, stamp: tuple[int, int]) -> ast.Module:
    return ast.parse(path.read_text())


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_mtime_ns, status.st_size


def _tree(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once for all the rules (again if the file changed)."""
    return _parsed(path, _stamp(path))


@functools.cache
def _walked(path: Path, stamp: tuple[int, int]) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(_parsed(path, stamp)))


def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the file's tree (``ast.walk``'s order), listed once for all the rules."""
    return _walked(path, _stamp(path))


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the package directory ``root``."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path) -> tuple[tuple[str, str | None, int], ...]:
    """``(module, imported name or None, line)`` of every import in the file, lazy ones too."""
    return _found_imports(name, path, _stamp(path))


@functools.cache
def _found_imports(name: str, path: Path, stamp: tuple[int, int]):
    found = []
    for node in _walked(path, stamp):
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
    return tuple(found)


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
            for statement in _tree(path).body
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


def file_code_lines(source: str) -> int:
    """Lines holding code: a docstring's, a comment's or a blank line does not count."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    docstrings.update(range(first.lineno, first.end_lineno + 1))
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (*skipped, tokenize.ENDMARKER):
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def long_files(root: Path) -> list[str]:
    sources = {name: path.read_text() for name, path in _modules(root).items()}
    return [
        f"{name}: {n} code lines"
        for name, source in sources.items()
        # no more code lines than lines: only the longer files are tokenized
        if source.count("\n") + 1 > MAX_CODE_LINES
        and (n := file_code_lines(source)) > MAX_CODE_LINES
    ]


def packed_lines(root: Path) -> list[str]:
    """Lines kept from the formatter with ``# fmt: skip`` (packed to meet a line count)."""
    return [
        f"{name}:{number}"
        for name, path in _modules(root).items()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.rstrip().endswith("# fmt: skip")
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
        for node in _nodes(path)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and code_lines(node) > MAX_FUNCTION_LINES
    ]


def _in(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def core_reaching(root: Path, core=CORE, libraries=ESTIMATOR_LIBRARIES) -> list[str]:
    """``core -> ... -> module imports library`` for each core module that reaches a library.

    The chain follows the package's imports (a package's ``__init__`` only where it is
    imported by name, as ``from ..sampling import sgld``).
    """
    modules, edges = _modules(root), _edges(root)
    prefixes = tuple(f"{root.name}.{c}" for c in core)
    direct = {
        name: sorted({base.split(".")[0] for base, _, _ in _imports(name, path)} & set(libraries))
        for name, path in modules.items()
    }
    found = []
    for start in sorted(m for m in modules if _in(m, prefixes)):
        paths, queue = {start: [start]}, [start]
        while queue:
            current = queue.pop(0)
            if direct[current]:
                chain = " -> ".join(paths[current])
                found.append(f"{chain} imports {', '.join(direct[current])}")
                break
            for target in sorted(edges[current]):
                if target not in paths:
                    paths[target] = [*paths[current], target]
                    queue.append(target)
    return found


def _top_level_names(path: Path) -> set[str]:
    return {
        node.name
        for node in _tree(path).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def wing_core_used_outside(root: Path, wings=WINGS) -> list[str]:
    """Imports of a wing's core (a module, or a name it defines) from outside the wing."""
    modules = _modules(root)
    found = []
    for wing, cores in wings.items():
        package = f"{root.name}.{wing}"
        for core in cores:
            core_module = f"{package}.{core}"
            if core_module not in modules:
                found.append(f"{core_module} is missing")
                continue
            names = _top_level_names(modules[core_module])
            for name, path in modules.items():
                if _in(name, (package,)):
                    continue
                for base, imported, line in _imports(name, path):
                    full = f"{base}.{imported}" if imported else base
                    if core_module in (base, full) or (base == package and imported in names):
                        found.append(f"{name}:{line} uses {core_module} from outside {package}")
    return found


def duplicate_public_names(root: Path) -> list[str]:
    """Public functions and classes defined at the top of more than one module."""
    homes: dict[str, list[str]] = {}
    for name, path in _modules(root).items():
        for defined in sorted(_top_level_names(path)):
            if not defined.startswith("_"):
                homes.setdefault(defined, []).append(name)
    return [f"{n}: {', '.join(where)}" for n, where in sorted(homes.items()) if len(where) > 1]


def figure_savers(root: Path, home: str = FIGURE_HOME) -> list[str]:
    """Calls of ``.savefig`` outside the module that saves the figures."""
    return [
        f"{name}:{node.lineno}"
        for name, path in _modules(root).items()
        if name != f"{root.name}.{home}"
        for node in _nodes(path)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "savefig"
    ]


def private_imports_from_outside(folders: list[Path], package: str) -> list[str]:
    """Imports of ``package``'s private names or private modules by files outside it."""
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            for node in _nodes(path):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    bases, names = [node.module], [alias.name for alias in node.names]
                elif isinstance(node, ast.Import):
                    bases, names = [alias.name for alias in node.names], []
                else:
                    continue
                for base in bases:
                    if base.split(".")[0] != package:
                        continue
                    private = [p for p in base.split(".") + names if p.startswith("_")]
                    private = [p for p in private if not p.startswith("__")]
                    if private:
                        found.append(f"{path.name}:{node.lineno} {base}: {', '.join(private)}")
    return found


def unmirrored_test_folders(tests: Path, root: Path) -> list[str]:
    """Test folders that mirror no package folder, or lack an ``__init__.py`` on their way."""
    found = []
    for folder in sorted({path.parent for path in tests.rglob("test_*.py")} - {tests}):
        relative = folder.relative_to(tests)
        if not (root / relative / "__init__.py").is_file():
            found.append(f"tests/{relative.as_posix()} mirrors no package folder")
        for part in [folder, *folder.parents][: len(relative.parts) + 1]:
            if not (part / "__init__.py").is_file():
                found.append(f"{part.relative_to(tests.parent).as_posix()} has no __init__")
    return sorted(set(found))


def _named_after(stem: str, names: set[str]) -> str | None:
    """The longest of ``names`` that ``test_<name>`` or ``test_<name>_<more>`` names."""
    words = stem.split("_")[1:]
    found = ["_".join(words[:i]) for i in range(1, len(words) + 1)]
    found = [name for name in found if name in names]
    return found[-1] if found else None


def _module_names(folder: Path) -> set[str]:
    """The modules of a package folder, without a leading underscore (``_matfile`` -> matfile)."""
    return {p.stem.lstrip("_") for p in folder.glob("*.py") if not p.stem.startswith("__")}


def misplaced_test_files(tests: Path, root: Path) -> list[str]:
    """Test files in a folder that import the package, but nothing from the folder they mirror,
    and are not named after one of its modules."""
    found = []
    for folder in sorted({path.parent for path in tests.rglob("test_*.py")} - {tests}):
        home = ".".join((root.name, *folder.relative_to(tests).parts))
        modules = _module_names(root / folder.relative_to(tests))
        for path in sorted(folder.glob("test_*.py")):
            imported = {
                f"{base}.{name}" if name else base
                for base, name, _ in _imports(f"tests.{path.stem}", path)
                if base.split(".")[0] == root.name
            }
            if imported and not any(_in(name, (home,)) for name in imported):
                if _named_after(path.stem, modules) is None:
                    found.append(f"{path.relative_to(tests.parent).as_posix()} imports no {home}")
    return found


def flat_test_families(tests: Path, root: Path, cross_cutting=CROSS_CUTTING) -> list[str]:
    """Flat test files named after a package folder, or after a module that lives in one (and
    not at the root): their tests belong in the folder that mirrors it."""
    at_root = _module_names(root)
    homes: dict[str, set[Path]] = {}
    for init in sorted(root.rglob("*/__init__.py")):
        folder = init.parent.relative_to(root)
        homes.setdefault(folder.name.lstrip("_"), set()).add(folder)
        for name in _module_names(init.parent):
            homes.setdefault(name, set()).add(folder)
    found = []
    for path in sorted(tests.glob("test_*.py")):
        if path.name in cross_cutting or _named_after(path.stem, at_root) is not None:
            continue
        name = _named_after(path.stem, set(homes))
        if name is not None:
            folders = " or ".join(f"tests/{f.as_posix()}/" for f in sorted(homes[name]))
            found.append(f"{path.name} belongs in {folders}")
    return found


def _classes(root: Path) -> dict[str, tuple[list[str], set[str]]]:
    """``module.Class`` -> (its bases among the package's classes, the names it defines)."""
    modules = _modules(root)
    found, imported = {}, {}
    for name, path in modules.items():
        tree = _tree(path)
        names = {}
        for base, alias, _ in _imports(name, path):
            if alias is not None:
                names[alias] = f"{base}.{alias}"
        imported[name] = names
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                defined = {
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                }
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                found[f"{name}.{node.name}"] = (bases, defined)
    resolved = {}
    for qualname, (bases, defined) in found.items():
        module = qualname.rsplit(".", 1)[0]
        full = [
            f"{module}.{b}" if f"{module}.{b}" in found else imported[module].get(b, b)
            for b in bases
        ]
        resolved[qualname] = ([b for b in full if b in found], defined)
    return resolved


def _ancestors(classes: dict, name: str) -> list[str]:
    """``name`` and its bases among the package's classes, each once."""
    seen, stack = [], [name]
    while stack:
        current = stack.pop(0)
        if current not in seen:
            seen.append(current)
            stack.extend(classes[current][0])
    return seen


def _overrides_a_hook(defined: set[str]) -> list[str]:
    return sorted(n for n in defined if n.startswith(("on_", "train_step")) or n in HOOKS)


def hook_overriders(root: Path, engine: str = ENGINE) -> list[str]:
    """Estimators (the package's classes built on the engine) in whose MRO a mixin overrides
    skorch's training hooks, or more than two classes do (the engine and one estimator)."""
    classes, engine = _classes(root), f"{root.name}.{engine}"
    estimators = [c for c in classes if c != engine and engine in _ancestors(classes, c)]
    found = []
    for estimator in sorted(estimators):
        overriding = [c for c in _ancestors(classes, estimator) if _overrides_a_hook(classes[c][1])]
        mixins = [c for c in overriding if c != engine and c not in estimators]
        if mixins or len(overriding) > 2:
            shown = ", ".join(
                f"{c} ({', '.join(_overrides_a_hook(classes[c][1]))})" for c in overriding
            )
            found.append(f"{estimator}: {shown}")
    return found


def face_bases(root: Path, face: str = FACE, engine: str = ENGINE) -> list[str]:
    """Bases of the face besides the engine that are not user-facing mixins."""
    classes = _classes(root)
    allowed = tuple(f"{root.name}.{m}" for m in USER_FACING)
    return [
        base
        for base in classes.get(f"{root.name}.{face}", ([], set()))[0]
        if base != f"{root.name}.{engine}" and base.rsplit(".", 1)[0] not in allowed
    ]


def _private_definitions(path: Path) -> set[str]:
    """Private names a module defines on its classes: methods, class attributes, ``self._x``."""
    names = set()
    for node in _nodes(path):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def capability_privates_read(root: Path) -> list[str]:
    """Reads of a private attribute that only a training capability's module defines, from
    any other module (a template's names, which the capabilities fill, are every module's)."""
    modules = _modules(root)
    defined = {name: _private_definitions(path) for name, path in modules.items()}
    shared = set().union(*(defined.get(f"{root.name}.{t}", set()) for t in TEMPLATES))
    owners: dict[str, set[str]] = {}
    for capability in CAPABILITIES:
        for private in defined.get(f"{root.name}.{capability}", set()) - shared:
            owners.setdefault(private, set()).add(f"{root.name}.{capability}")
    found = []
    for name, path in modules.items():
        for node in _nodes(path):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                homes = owners.get(node.attr, set())
                if homes and name not in homes and node.attr not in defined[name]:
                    found.append(
                        f"{name}:{node.lineno} reads {node.attr} of {', '.join(sorted(homes))}"
                    )
    return found


def _mentions_seed(node: ast.AST) -> bool:
    return any(
        "seed" in (getattr(n, "id", None) or getattr(n, "attr", None) or "").lower()
        for n in ast.walk(node)
    )


def seed_arithmetic(root: Path) -> list[str]:
    """``default_rng(``, ``SeedSequence(`` and a seed combined with a literal number, outside
    the home of the fit's generators and the folders that draw data of their own."""
    home = f"{root.name}.{GENERATORS}"
    own = tuple(f"{root.name}.{folder}" for folder in OWN_DRAWS)
    found = []
    for name, path in _modules(root).items():
        if name == home or _in(name, own):
            continue
        for node in _nodes(path):
            # a reference, called or passed on (``map(np.random.default_rng, seeds)``)
            if isinstance(node, (ast.Attribute, ast.Name)):
                named = getattr(node, "attr", None) or getattr(node, "id", None)
                if named in ("default_rng", "SeedSequence"):
                    found.append(f"{name}:{node.lineno} {named}(")
            elif isinstance(node, ast.BinOp):
                sides = (node.left, node.right)
                literal = any(
                    isinstance(s, ast.Constant) and isinstance(s.value, int) for s in sides
                )
                if literal and any(_mentions_seed(s) for s in sides):
                    found.append(f"{name}:{node.lineno} seed arithmetic")
    return found


def long_module_docstrings(root: Path, most: int = MAX_MODULE_DOCSTRING) -> list[str]:
    found = []
    for name, path in _modules(root).items():
        body = _tree(path).body
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            if isinstance(first.value.value, str):
                lines = first.end_lineno - first.lineno + 1
                if lines > most:
                    found.append(f"{name}: {lines} lines")
    return found


# ---------------------------------------------------------------- the package


def test_no_alias_modules():
    assert alias_modules(PACKAGE) == []


def test_generic_latent_layer_imports_no_structure():
    assert generic_latent_imports(PACKAGE) == []


def test_no_private_names_across_package_directories():
    assert private_imports(PACKAGE) == []


def test_no_import_cycles_counting_lazy_imports():
    assert import_cycles(PACKAGE) == []


def test_no_file_over_400_code_lines_and_none_packed():
    assert long_files(PACKAGE) == []
    assert packed_lines(PACKAGE) == []


def test_no_function_over_60_code_lines():
    assert long_functions(PACKAGE) == []


def test_the_functional_core_reaches_no_estimator_library():
    assert core_reaching(PACKAGE) == []


def test_a_wing_core_is_used_by_the_faces_beside_it():
    assert wing_core_used_outside(PACKAGE) == []


def test_one_home_per_public_name():
    assert duplicate_public_names(PACKAGE) == []


def test_only_plotting_saves_figures():
    assert figure_savers(PACKAGE) == []


def test_benchmarks_and_examples_import_no_private_name():
    root = PACKAGE.parent
    found = private_imports_from_outside([root / "benchmarks", root / "examples"], "ebmclassifier")
    # benchmarks/results/ keeps the scripts of past measurements as they ran (records of a
    # commit, like their JSON files), not code that follows the package
    recorded = {path.name for path in (root / "benchmarks" / "results").rglob("*.py")}
    assert [line for line in found if line.split(":")[0] not in recorded] == []


def test_the_tests_mirror_the_package():
    assert unmirrored_test_folders(TESTS, PACKAGE) == []
    assert misplaced_test_files(TESTS, PACKAGE) == []
    assert flat_test_families(TESTS, PACKAGE) == []


def test_only_the_engine_and_the_estimators_override_skorchs_training_hooks():
    assert hook_overriders(PACKAGE) == []
    assert face_bases(PACKAGE) == []


def test_no_module_reads_a_training_capabilitys_private_attributes():
    assert capability_privates_read(PACKAGE) == []


def test_no_seed_is_derived_outside_the_fits_generators():
    assert seed_arithmetic(PACKAGE) == []


def test_no_module_docstring_over_50_lines():
    assert long_module_docstrings(PACKAGE) == []


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
    prose = '"""' + "A module docstring line.\n" * 500 + '"""\n' + "# a comment\n\n" * 200
    package = _write(
        tmp_path,
        {
            "big.py": "X = (\n    1\n)\n" * (MAX_CODE_LINES // 3 + 1),  # 3 code lines each
            "fine.py": prose + "X = 1\n" * MAX_CODE_LINES,  # long, but mostly prose
            "funcs.py": f"def long():\n{long_body}\n\ndef short():\n{short_body}",
            "packed.py": "X = [1,2,\n    3]  # fmt: skip\n",
        },
    )
    assert long_files(package) == [f"pkg.big: {3 * (MAX_CODE_LINES // 3 + 1)} code lines"]
    assert packed_lines(package) == ["pkg.packed:2"]
    assert long_functions(package) == [
        f"pkg.funcs.long (line 1): {MAX_FUNCTION_LINES + 1} code lines"
    ]


def test_the_checker_flags_a_core_reaching_an_estimator_library(tmp_path):
    package = _write(
        tmp_path,
        {
            "_checks.py": "import sklearn\n",
            "energy.py": "def f():\n    from ._checks import x\n    return x\n",
            "losses.py": "from .energy import f\n",
            "sampling/langevin.py": "import torch\n",  # clean
            "ngebm.py": "import skorch\nfrom .losses import f\n",  # a face: allowed
        },
    )
    assert core_reaching(package, core=("energy", "losses", "sampling")) == [
        "pkg.energy -> pkg._checks imports sklearn",
        "pkg.losses -> pkg.energy -> pkg._checks imports sklearn",
    ]


def test_the_checker_flags_a_face_away_from_its_wing_core(tmp_path):
    package = _write(
        tmp_path,
        {
            "compose/energies.py": "def product():\n    return 1\n",
            "compose/product.py": "from .energies import product\n",  # beside: allowed
            "compose/__init__.py": "from .energies import product\n",
            "ensemble.py": "from .compose import product\n",
            "mixture.py": "from .compose.energies import product\n",
            "cli.py": "from .compose import Other\n",  # not a core name
        },
    )
    assert wing_core_used_outside(package, wings={"compose": ("energies",)}) == [
        "pkg.ensemble:1 uses pkg.compose.energies from outside pkg.compose",
        "pkg.mixture:1 uses pkg.compose.energies from outside pkg.compose",
    ]


def test_the_checker_flags_a_name_with_two_homes(tmp_path):
    package = _write(
        tmp_path,
        {
            "report.py": "def write_report():\n    pass\n\ndef _helper():\n    pass\n",
            "continual.py": "def write_report():\n    pass\n\ndef _helper():\n    pass\n",
            "compare.py": "from .report import write_report\n",  # a re-export: one home
        },
    )
    assert duplicate_public_names(package) == ["write_report: pkg.continual, pkg.report"]


def test_the_checker_flags_a_figure_saved_outside_plotting(tmp_path):
    package = _write(
        tmp_path,
        {
            "plotting.py": "def finish(fig, path):\n    fig.savefig(path)\n",
            "figures.py": "def curves(fig, path):\n    fig.savefig(path, dpi=120)\n",
        },
    )
    assert figure_savers(package) == ["pkg.figures:2"]


def test_the_checker_flags_a_private_import_from_a_benchmark(tmp_path):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "a.py").write_text("from pkg.demo import _digits\nfrom pkg.demo import digits\n")
    (bench / "b.py").write_text("import pkg._trusted\nfrom pkg import __version__\n")
    (bench / "c.py").write_text("from other import _x\n")  # another package: not ours
    assert private_imports_from_outside([bench], "pkg") == [
        "a.py:1 pkg.demo: _digits",
        "b.py:1 pkg._trusted: _trusted",
    ]


def test_the_checker_flags_tests_that_do_not_mirror_the_package(tmp_path):
    folders = ("compose", "sampling", "latent/trees", "_estimator")
    modules = ["_estimator/repr.py", "datasets/_matfile.py", "nn.py"]
    # a root module whose name a folder's module shares
    modules += ["docstrings.py", "_estimator/docstrings.py"]
    package = _write(tmp_path, {**{f"{f}/x.py": "" for f in folders}, **dict.fromkeys(modules, "")})
    (package / "latent" / "__init__.py").touch()
    tests = tmp_path / "tests"
    files = {
        "test_compose.py": "",  # a wing's tests sit in its folder
        "test_sampling.py": "",  # a folder's, even one flat file
        "test_trees_0.py": "",
        "test_repr.py": "",  # a module's that lives in a folder
        "test_matfile_headers.py": "",  # named after a private module, and more words
        "test_nn.py": "",  # a root module's: flat
        "test_docstrings.py": "",  # the root module's, not _estimator/docstrings.py's
        "test_hostile_inputs.py": "",  # a concern of the whole package: flat
        "latent/trees/test_x.py": "from pkg.latent.trees import x\n",
        "latent/trees/test_enumeration.py": "import itertools\n",  # a shared reference
        "latent/test_b.py": "from pkg import compose\nfrom pkg.sampling import x\n",
        "_estimator/test_repr.py": "from pkg import compose\n",  # named after its module
        "_estimator/test_repr_more.py": "from pkg import compose\n",
        "_estimator/test_loop.py": "from pkg import compose\n",  # neither
        "plots/test_figures.py": "from pkg.plots import f\n",  # no package folder plots/
        **{f"{f}/__init__.py": "" for f in (".", "latent/trees", "plots", "_estimator")},
    }
    for relative, source in files.items():
        (tests / relative).parent.mkdir(parents=True, exist_ok=True)
        (tests / relative).write_text(source)
    assert unmirrored_test_folders(tests, package) == [
        "tests/latent has no __init__",
        "tests/plots mirrors no package folder",
    ]
    assert misplaced_test_files(tests, package) == [
        "tests/_estimator/test_loop.py imports no pkg._estimator",
        "tests/latent/test_b.py imports no pkg.latent",
    ]
    assert flat_test_families(tests, package, cross_cutting=()) == [
        "test_compose.py belongs in tests/compose/",
        "test_matfile_headers.py belongs in tests/datasets/",
        "test_repr.py belongs in tests/_estimator/",
        "test_sampling.py belongs in tests/sampling/",
        "test_trees_0.py belongs in tests/latent/trees/",
    ]


_ENGINE = """
    class TrainingEngine(NeuralNet):
        def on_epoch_begin(self, net, **kwargs):
            pass

        def initialize(self):
            return self
"""


def test_the_checker_flags_a_mixin_overriding_a_training_hook(tmp_path):
    package = _write(
        tmp_path,
        {
            "_estimator/engine.py": "from skorch import NeuralNet\n" + textwrap.dedent(_ENGINE),
            "_estimator/resume.py": """
                class ResumableMixin:
                    def on_train_begin(self, net, **kwargs):
                        pass
            """,
            "_estimator/inference.py": """
                class InferenceMixin:
                    def predict(self, X):
                        pass
            """,
            "_estimator/base.py": """
                from .engine import TrainingEngine
                from .inference import InferenceMixin
                from .resume import ResumableMixin

                class EBMClassifierBase(InferenceMixin, ResumableMixin, TrainingEngine):
                    pass
            """,
            "good.py": """
                from ._estimator.engine import TrainingEngine
                from ._estimator.inference import InferenceMixin

                class Good(InferenceMixin, TrainingEngine):
                    def on_batch_end(self, net, **kwargs):
                        pass

                class Special(Good):
                    def train_step(self, batch):
                        pass
            """,
        },
    )
    found = hook_overriders(package)
    assert [line.split(":")[0] for line in found] == [
        "pkg._estimator.base.EBMClassifierBase",
        "pkg.good.Special",
    ]
    assert "pkg._estimator.resume.ResumableMixin (on_train_begin)" in found[0]
    assert face_bases(package) == ["pkg._estimator.resume.ResumableMixin"]


def test_the_checker_flags_a_capability_reading_anothers_private_attribute(tmp_path):
    package = _write(
        tmp_path,
        {
            "_estimator/engine.py": """
                class TrainingEngine:
                    def _generator(self):
                        pass
            """,
            "_estimator/resume.py": """
                class Resume:
                    def on_train_begin(self, net):
                        self._fitting = True
                        net._generator()  # a template's hook: every module's
            """,
            "_divergence.py": """
                class Rollback:
                    def on_epoch_end(self, net):
                        return net._fitting
            """,
        },
    )
    assert capability_privates_read(package) == [
        "pkg._divergence:4 reads _fitting of pkg._estimator.resume"
    ]


def test_the_checker_flags_seeds_derived_outside_the_generators(tmp_path):
    package = _write(
        tmp_path,
        {
            "_utils/generators.py": "import numpy as np\nrng = np.random.default_rng([1, 2])\n",
            "datasets/named.py": "import numpy as np\nrng = np.random.default_rng(0)\n",
            "continual/_mixin.py": """
                import numpy as np

                def draws(self, seen):
                    a = np.random.default_rng([self._fit_seed(), seen])
                    b = np.random.SeedSequence([self.seed_, 1])
                    c = self._fit_seed() * 7919 + len(seen)
                    d = len(seen) + 2**31
                    e = list(map(np.random.default_rng, seen))
                    return a, b, c, d, e
            """,
        },
    )
    assert seed_arithmetic(package) == [
        "pkg.continual._mixin:5 default_rng(",
        "pkg.continual._mixin:6 SeedSequence(",
        "pkg.continual._mixin:7 seed arithmetic",
        "pkg.continual._mixin:9 default_rng(",
    ]


def test_the_checker_flags_a_long_module_docstring(tmp_path):
    def essay(lines: int) -> str:  # a docstring of this many lines, its quotes included
        return '"""Title.\n' + "More.\n" * (lines - 2) + '"""\n'

    package = _write(tmp_path, {"at.py": essay(50), "past.py": essay(51)})
    assert long_module_docstrings(package) == ["pkg.past: 51 lines"]

"""Every import the backends make resolves, checked on the CPU.

Some import statements run only on a GPU (lazy imports inside launch paths), so running the CPU
suite does not prove they resolve. These tests read every .py file under backends/ with `ast`,
collect every Import / ImportFrom (module level and inside functions), resolve relative ones,
and check the target module exists (importlib.util.find_spec, which executes at most the parent
packages' __init__) and, for `from M import name` of a project module, that `name` is a
submodule of M or defined in M's source. The same check covers imports of evt_backends from the
rest of the repository, string module paths (entry points, the plugin table, the generated
kernels' headers), and finally every module under backends/numba_cuda is imported for real
(none needs a GPU at import time).
"""
import ast
import importlib
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ROOT / "backends"
PROJECT = ("evt_backends", "evt_core")
# Third-party packages a CPU machine may lack (array libraries of the caller, the cupy backend's
# runtime): an import of one is checked only when the package is installed.
OPTIONAL = {"cupy", "torch"}


def _module_name(path):
    """backends/numba_cuda/runtime/build.py -> ('evt_backends.numba_cuda.runtime.build', False)."""
    rel = path.relative_to(BACKENDS).with_suffix("")
    parts = ["evt_backends", *rel.parts]
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _imports(path, module, is_package):
    """(line, target module, [names imported from it] or None) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            yield node.lineno, target, [a.name for a in node.names]


def _exists(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _top_level_names(module):
    """Names a module's source binds at top level (outside functions and classes)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    names = set()
    stack = list(ast.parse(Path(spec.origin).read_text()).body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, field, []))
        elif isinstance(node, ast.ExceptHandler):
            stack.extend(node.body)
    return names


def _problem(target, names):
    """None when `from target import names` (or `import target`) resolves, else what is wrong."""
    top = target.split(".")[0]
    if top in OPTIONAL and not _exists(top):
        return None
    if not _exists(target):
        return f"no module {target}"
    if names is None or top not in PROJECT:
        return None
    defined = _top_level_names(target)
    for name in names:
        if name == "*" or (name.startswith("__") and name.endswith("__")) or _exists(f"{target}.{name}"):
            continue
        if defined is not None and name in defined:
            continue
        if defined is not None and "__getattr__" in defined:     # a lazy re-export: ask it
            try:
                getattr(importlib.import_module(target), name)
                continue
            except AttributeError:
                pass
        return f"{target} has no {name!r}"
    return None


def _backend_files():
    return sorted(p for p in BACKENDS.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_import_under_backends_resolves():
    bad, count = [], 0
    for path in _backend_files():
        module, is_package = _module_name(path)
        for line, target, names in _imports(path, module, is_package):
            count += 1
            why = _problem(target, names)
            if why:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    assert count > 200, count          # the walk saw the backends (module-level and lazy imports)
    assert not bad, "\n".join(bad)


def _repo_files():
    skip = {"backends", ".git", "build", "evt.egg-info"}
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT).parts
        if rel[0] not in skip and "__pycache__" not in rel:
            yield p


def test_imports_of_the_backends_from_the_rest_of_the_repository_resolve():
    """tests, bench, scripts and evt_core (e.g. evt_core/torch/ops.py's lazy
    `from evt_backends.numba_cuda.runtime import driver`)."""
    bad = []
    for path in _repo_files():
        try:
            tree = ast.parse(path.read_text(), str(path))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("evt_backends"):
                why = _problem(node.module, [a.name for a in node.names])
            elif isinstance(node, ast.Import):
                why = next((_problem(a.name, None) for a in node.names if a.name.startswith("evt_backends")), None)
            else:
                continue
            if why:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {why}")
    assert not bad, "\n".join(bad)


_DOTTED = re.compile(r"evt_backends(\.[A-Za-z_]\w*)+")


def test_string_module_paths_resolve():
    """Module paths written as strings: the entry points, the core's plugin table, any
    "evt_backends.x.y" string in the code (a module, or a module's top-level name)."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    paths = {v.split(":")[0] for v in meta["project"]["entry-points"]["evt_core.backends"].values()}
    assert "evt_backends.numba_cuda.plugin" in paths
    for path in [*_repo_files(), *_backend_files()]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED.fullmatch(node.value):
                paths.add(node.value)
    bad = []
    for dotted in sorted(paths):
        parts = dotted.split(".")
        # the longest prefix that is a module; the rest must be names it defines
        for i in range(len(parts), 0, -1):
            if _exists(".".join(parts[:i])):
                break
        module, rest = ".".join(parts[:i]), parts[i:]
        if rest and _problem(module, rest[:1]):
            bad.append(dotted)
    assert not bad, bad


def test_generated_kernel_headers_import_existing_modules():
    """The generated numba sources import the intrinsics by module path (runtime/build.py's
    headers, mainloop_sm90.module_prelude): those paths must follow the files."""
    from evt_backends.numba_cuda.codegen.mainloop_sm90 import module_prelude
    from evt_backends.numba_cuda.runtime.build import module_source
    texts = [module_source("pass", "key", simulator=s) for s in (False, True)]
    texts += [module_prelude(dt, k) for dt in ("float16", "bfloat16") for k in (True, False)]
    for text in texts:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom):
                assert _problem(node.module, [a.name for a in node.names]) is None, node.module


# Modules that need a GPU at import time, so cannot be imported here: none today.
NEEDS_GPU_AT_IMPORT = set()


def _numba_cuda_modules():
    for path in sorted((BACKENDS / "numba_cuda").rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield _module_name(path)[0]


@pytest.mark.parametrize("module", list(_numba_cuda_modules()))
def test_every_numba_cuda_module_imports_on_the_cpu(module):
    pytest.importorskip("numba.cuda")
    if module in NEEDS_GPU_AT_IMPORT:
        pytest.skip("needs a GPU at import time")
    importlib.import_module(module)

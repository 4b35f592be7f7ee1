"""The package table of DESIGN.md / docs/architecture.md, checked on the source.

Every `import tfpipe.X` / `from tfpipe.X import ...` inside `src/tfpipe/<pkg>/`
must point at a package that `<pkg>` may import, and a name imported from
another package must be public (no leading underscore, imported from the
package or one of its public modules). Reading the source with `ast` (no
import) keeps the check independent of what happens to be loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tfpipe"

LEAVES = {"errors", "system", "native", "sample_data", "_tf", "_version", "envinfo", "switches"}
# package -> the internal packages it may import (besides itself and the leaves)
ALLOWED: dict[str, set[str]] = {
    "seeds": set(),
    "records": {"seeds"},
    "features": {"records"},
    "convert": {"records", "features"},
    "augment": {"seeds"},
    "config": set(),
    "pipeline": {"records", "augment", "features", "seeds", "config"},
    "train": {"pipeline", "config"},
    "export": {"pipeline", "augment", "features", "config"},
    "service": {"pipeline"},
    "doctor": {"pipeline", "config"},
    "bench": {"pipeline", "train", "records", "config", "doctor"},
}
for leaf in LEAVES:
    ALLOWED.setdefault(leaf, set())


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 or rel.suffix else ""


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, dotted module under tfpipe, names imported from it), plus each
    `alias._name` attribute use of a name those imports bound (as a pseudo
    import of `module.alias._name`)."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    bound: dict[str, str] = {}  # local name -> dotted tfpipe module (or module.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("tfpipe."):
                    out.append((node.lineno, a.name, []))
                    if a.asname:
                        bound[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and (node.module == "tfpipe" or node.module.startswith("tfpipe.")):
            out.append((node.lineno, node.module, [a.name for a in node.names]))
            for a in node.names:
                bound[a.asname or a.name] = f"{node.module}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in bound and _private(node.attr):
            out.append((node.lineno, bound[node.value.id], [node.attr]))
    return out


def _violations() -> list[str]:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        pkg = _package_of(path)
        if pkg in ("", "__init__", "__main__"):
            continue  # the top-level lazy surface may use everything
        # the CLI may import every package, but only its public names (DESIGN.md:
        # "the CLI holds no logic that a Python user could not call")
        allowed = set(ALLOWED) if pkg == "cli" else ALLOWED.get(pkg)
        where = path.relative_to(SRC.parent)
        if allowed is None:
            bad.append(f"{where}: package {pkg!r} is not in the DESIGN.md table")
            continue
        for line, module, names in _imports(path):
            parts = module.split(".")
            if len(parts) == 1:  # `from tfpipe import seeds, augment`
                targets = [(n, []) for n in names]
            else:
                targets = [(parts[1], parts[2:] + names)]
            for target, rest in targets:
                if target == pkg:
                    continue
                if target not in allowed and target not in LEAVES:
                    bad.append(f"{where}:{line}: {pkg} imports tfpipe.{target} "
                               f"(allowed: {sorted(allowed) or 'leaves only'})")
                elif target not in ("_tf", "_version") and any(_private(p) for p in rest):
                    bad.append(f"{where}:{line}: {pkg} uses private "
                               f"tfpipe.{target}.{'.'.join(rest)}")
    return bad


def _violations_in(tree: Path) -> list[str]:
    """`_violations()` over a fake package tree instead of src/tfpipe."""
    global SRC
    old, SRC = SRC, tree
    try:
        return _violations()
    finally:
        SRC = old


def test_checker_sees_a_violation(tmp_path: Path) -> None:
    """The checker itself: a forbidden and a private import are both reported."""
    fake = tmp_path / "tfpipe"
    (fake / "augment").mkdir(parents=True)
    (fake / "augment" / "x.py").write_text(
        "from tfpipe.pipeline import build_pipeline\nfrom tfpipe.seeds._rows import f\n"
        "from tfpipe import seeds as sd\nsd._hidden(1)\n")
    found = _violations_in(fake)
    assert any("imports tfpipe.pipeline" in v for v in found), found
    assert any("private tfpipe.seeds._rows" in v for v in found), found
    assert any("private tfpipe.seeds._hidden" in v for v in found), found


def test_checker_sees_private_use_from_the_cli(tmp_path: Path) -> None:
    """The CLI may import any package, but only public names (e.g. `bench._build`,
    `augment.color._adjust_x`, `geometry._split_seed` were once reached from outside)."""
    fake = tmp_path / "tfpipe"
    (fake / "cli").mkdir(parents=True)
    (fake / "cli" / "bench.py").write_text(
        "from tfpipe.bench._build import build_from\nfrom tfpipe.pipeline import build_pipeline\n"
        "from tfpipe.augment import geometry as G\nG._split_seed(1, 2)\n")
    (fake / "pipeline").mkdir()
    (fake / "pipeline" / "fast.py").write_text("from tfpipe.augment import color\ncolor._adjust_x(1)\n")
    found = _violations_in(fake)
    assert any("cli uses private tfpipe.bench._build" in v for v in found), found
    assert any("tfpipe.augment.geometry._split_seed" in v for v in found), found
    assert any("pipeline uses private tfpipe.augment.color._adjust_x" in v for v in found), found
    assert not any("imports tfpipe.pipeline" in v for v in found), found


def test_imports_follow_the_package_table() -> None:
    bad = _violations()
    assert not bad, "imports that break DESIGN.md's package table:\n" + "\n".join(bad)


# ------------------------------------------------------------------ import cycles
def _module_graph(root: Path) -> dict[str, set[str]]:
    """tfpipe module -> the tfpipe modules it imports, anywhere in its source
    (function-level imports too: a lazy import only hides a cycle). `from pkg import
    name` points at the submodule `pkg.name` when there is one, else at `pkg`. A
    module's own package `__init__` is not an edge (Python imports it first anyway)."""
    mods: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = ("tfpipe",) + path.relative_to(root).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out.update(known(a.name) for a in node.names if a.name.startswith("tfpipe"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package up
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base == "tfpipe" or base.startswith("tfpipe."):
                    out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else known(base)
                               for a in node.names)
        graph[mod] = {m for m in out if m is not None and m != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_checker_sees_a_lazy_cycle(tmp_path: Path) -> None:
    fake = tmp_path / "tfpipe"
    (fake / "pipeline").mkdir(parents=True)
    (fake / "pipeline" / "__init__.py").write_text("from tfpipe.pipeline._a import f\n")
    (fake / "pipeline" / "_a.py").write_text("def f():\n    from tfpipe.pipeline import _b\n")
    (fake / "pipeline" / "_b.py").write_text("from tfpipe.pipeline._a import f\n")
    (fake / "pipeline" / "_c.py").write_text("from . import _a\n")
    assert _cycles(_module_graph(fake)) == [["tfpipe.pipeline._a", "tfpipe.pipeline._b"]]


def test_no_import_cycles() -> None:
    """No tfpipe module imports itself through others, at module or function level
    (shared pieces live in their own modules: pipeline/_epochs, _caching,
    _cardinality; export/_files; bench/_check_core)."""
    cycles = _cycles(_module_graph(SRC))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)

"""The package's imports go one way: no import cycle (counting the imports inside functions and the
package ``__init__`` that importing a submodule runs), and no module imports from a higher layer
than its own in the layer table of docs/architecture.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "depthpe"
DOC = ROOT / "docs" / "architecture.md"


def package_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (packages by their ``__init__``)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imported_names(module: str, path: Path) -> set[str]:
    """Every name imported anywhere in the file (module level and inside functions), absolute."""
    is_package = path.name == "__init__.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names.add(source)
            names.update(f"{source}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it makes Python import: the target and the ``__init__`` of
    every package above the target that is not above the importer too."""
    modules = package_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for name in _imported_names(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if not name.startswith("depthpe"):
                continue
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                if target != module and not (module + ".").startswith(target + "."):
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def documented_layers() -> dict[str, int]:
    """Module name or prefix -> layer number, from the ``| layer | modules |`` table of the page."""
    text = DOC.read_text()
    start = text.index("| layer | modules |")
    layers = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        number, cell = (c.strip() for c in line.strip().strip("|").split("|")[:2])
        for name in re.findall(r"`(depthpe[\w.]*)`", cell):
            layers[name] = int(number)
    return layers


def layer_of(module: str, layers: dict[str, int]) -> int | None:
    """The layer of the longest table entry naming ``module`` or a package above it (the entry
    ``depthpe`` stands for the package's own ``__init__`` only)."""
    matches = [e for e in layers if e == module or (e != "depthpe" and module.startswith(e + "."))]
    return layers[max(matches, key=len)] if matches else None


def test_the_import_graph_sees_function_level_imports():
    graph = import_graph()
    assert "depthpe.model.inference" in graph["depthpe.evaluation.loop"]  # module level
    assert "depthpe.prediction.exports" in graph["depthpe.commands.predict"]  # inside run()
    assert "depthpe.model" in graph["depthpe.prediction.api"]  # the package __init__ a submodule import runs


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, f"import cycles (module level or inside functions): {found}"


def test_imports_go_down_the_documented_layers():
    layers = documented_layers()
    graph = import_graph()
    unplaced = sorted(m for m in graph if layer_of(m, layers) is None)
    assert not unplaced, f"docs/architecture.md's layer table does not place {unplaced}"
    upward = sorted(f"{a} (layer {layer_of(a, layers)}) imports {b} (layer {layer_of(b, layers)})"
                    for a, targets in graph.items() for b in targets if layer_of(b, layers) > layer_of(a, layers))
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_at_most_six_layers_and_each_folder_in_exactly_one():
    layers = documented_layers()
    assert max(layers.values()) <= 6 and set(layers.values()) == set(range(1, max(layers.values()) + 1))
    too_deep = sorted(name for name in layers if name.count(".") > 1)
    assert not too_deep, f"the layer table splits a folder over layers: {too_deep}"
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    unplaced = sorted(f for f in folders if f"depthpe.{f}" not in layers)
    assert not unplaced, f"folders without a layer: {unplaced}"


def _imports_between(graph: dict[str, set[str]], source: str, target: str) -> list[str]:
    return sorted(f"{a} imports {b}" for a, targets in graph.items() if a.startswith(source + ".") or a == source
                  for b in targets if b == target or b.startswith(target + "."))


def test_the_loader_reads_scene_files_through_one_public_module():
    graph = import_graph()
    through_api = [line for line in _imports_between(graph, "depthpe.loader", "depthpe.scenes")
                   if not line.endswith(("depthpe.scenes.api", " depthpe.scenes"))]
    assert not through_api, "the loader imports scenes internals:\n" + "\n".join(through_api)
    assert _imports_between(graph, "depthpe.loader", "depthpe.scenes.api"), "the check sees no loader import at all"
    assert not _imports_between(graph, "depthpe.scenes", "depthpe.loader")


def test_model_and_loader_and_commands_walls():
    graph = import_graph()
    assert not _imports_between(graph, "depthpe.model", "depthpe.loader")
    assert not _imports_between(graph, "depthpe.loader", "depthpe.model")
    for package in ("depthpe.bench", "depthpe.studies"):
        assert not _imports_between(graph, package, "depthpe.commands"), package
        assert not _imports_between(graph, package, "depthpe.cli"), package

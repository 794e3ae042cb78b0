"""The layout is the architecture: core imports nothing of addon, and addon's rooms form no circle."""

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
ROOMS = ("commands", "audit", "web", "proxy", "inspection", "handover", "sinks", "harness")


def imported_rooms(path: Path) -> set[str]:
    """The addon rooms (or "options", "core") a module imports, relative or absolute."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against the module's own package
                package = path.relative_to(ROOT / "addon").parent.parts
                base = list(package[: len(package) - (node.level - 1)])
                parts = [*base, *module.split(".")] if module else base
                names = [n.name for n in node.names] if not module else []
                found.update(p for p in [*parts[:1], *names] if p)
            elif module.startswith("tooltap.addon."):
                found.add(module.split(".")[2])
            elif module.startswith("tooltap.core"):
                found.add("core")
    return found


def room_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {room: set() for room in (*ROOMS, "options")}
    for path in (ROOT / "addon").rglob("*.py"):
        parts = path.relative_to(ROOT / "addon").parts
        room = parts[0] if len(parts) > 1 else path.stem
        if room in graph:
            graph[room] |= {r for r in imported_rooms(path) if r in graph and r != room}
    return graph


def test_core_never_imports_the_shell_or_mitmproxy():
    for path in (ROOT / "core").glob("*.py"):
        text = path.read_text()
        assert "tooltap.addon" not in text and "import mitmproxy" not in text, path.name


def test_the_rooms_of_addon_import_one_way_with_no_circle():
    graph = room_graph()
    assert graph["sinks"] == set() and graph["harness"] == set()
    assert "proxy" not in graph["inspection"] | graph["handover"] | graph["sinks"]
    assert "web" not in set().union(*(graph[r] for r in graph if r != "commands"))
    # A topological order exists exactly when there is no circle.
    done: list[str] = []
    while len(done) < len(graph):
        ready = [r for r in graph if r not in done and graph[r] <= set(done)]
        assert ready, f"a circle among {sorted(set(graph) - set(done))}: {graph}"
        done += ready

"""The layout is the architecture: core imports nothing of addon, and addon's rooms form no circle."""

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
ROOMS = ("commands", "audit", "web", "proxy", "inspection", "handover", "sinks", "harness")
ROOMS += ("testing",)  # the pytest plugin


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


# What core may import: pure parts of the standard library (no I/O, no clock, no logging,
# no threads) and the parsing libraries it is built on. Anything else, mitmproxy and
# tooltap.addon included, is a breach of "core is pure".
CORE_MAY_IMPORT = {
    "__future__", "typing", "collections", "dataclasses", "re", "json", "zlib", "urllib",
    "enum", "functools", "itertools", "math", "abc", "base64", "binascii", "struct", "hashlib",
    "pydantic", "orjson", "jsonschema_rs", "brotli", "zstandard", "botocore", "ijson", "regex",
}  # fmt: skip


def absolute_imports(path: Path) -> set[str]:
    """The top-level modules a file imports by absolute name, wherever the import sits."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add((node.module or "").split(".")[0])
    return found


def test_core_imports_only_pure_modules_never_the_shell_or_mitmproxy():
    for path in (ROOT / "core").rglob("*.py"):
        assert absolute_imports(path) <= CORE_MAY_IMPORT, (
            path.name,
            absolute_imports(path) - CORE_MAY_IMPORT,
        )


def test_the_import_check_sees_every_form_of_import(tmp_path):
    planted = tmp_path / "planted.py"
    for line in (
        "from mitmproxy import http",
        "import mitmproxy.http",
        "import logging",
        "def f():\n    from tooltap.addon import options",
        "import time as clock",
    ):
        planted.write_text(line + "\n")
        assert not absolute_imports(planted) <= CORE_MAY_IMPORT, line
    planted.write_text("from .wire import Api\nfrom collections.abc import Mapping\n")
    assert absolute_imports(planted) == {"collections"}


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


# The rules and the machinery every dialect shares: none of them may name a dialect.
DIALECT_FREE = ("parallel", "schema", "arguments", "findings", "inspection", "loop", "stream")


def test_the_rules_never_name_a_dialect_they_ask_the_table():
    from tooltap.core.dialects import DIALECTS

    for module in DIALECT_FREE:
        tree = ast.parse((ROOT / "core" / f"{module}.py").read_text())
        named = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in DIALECTS
        }
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and (node.module or "").rpartition(".")[2] in DIALECTS
        }
        assert named == imported == set(), (module, named, imported)


def test_each_dialect_and_each_shared_path_is_a_module_of_its_own_and_a_row_of_the_table():
    from tooltap.core.dialects import DIALECTS, SHARED

    rooms = {p.stem for p in (ROOT / "core" / "dialects").glob("*.py")} - {"__init__", "base"}
    shared = {path.reading.__module__.rpartition(".")[2] for path in SHARED}
    # A room may keep a part beside it, named after it (responses_socket).
    beside = {
        room
        for room in rooms - set(DIALECTS)
        if any(room.startswith(f"{api}_") for api in DIALECTS)
    }
    assert rooms - beside == set(DIALECTS) | shared and not shared & set(DIALECTS)
    for api, dialect in DIALECTS.items():
        assert dialect.api == api and dialect.read_turn.__module__.endswith(f"dialects.{api}")


def test_every_socket_reader_lives_in_its_dialects_room():
    from tooltap.core.dialects import DIALECTS

    readers = {api: d.socket.reader for api, d in DIALECTS.items() if d.socket is not None}
    assert set(readers) == {"responses", "realtime", "gemini_live"}
    for api, reader in readers.items():
        room = reader.__module__.rpartition(".")[2]
        assert reader.__module__.startswith("tooltap.core.dialects.")
        assert room in (api, f"{api}_socket"), (api, reader.__module__)


def module_graph(top: Path, package: str) -> dict[str, set[str]]:
    """Every module of a package and the package's modules it imports, at any depth of the file
    (an import inside a function is a tie too)."""
    names = {
        ".".join((package, *p.relative_to(top).with_suffix("").parts)).removesuffix(".__init__")
        for p in top.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for path in top.rglob("*.py"):
        name = ".".join((package, *path.relative_to(top).with_suffix("").parts))
        is_package = name.endswith(".__init__")
        name = name.removesuffix(".__init__")
        here = name.split(".") if is_package else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = here[: len(here) - (node.level - 1)] if node.level else []
                module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
                if not node.level:
                    module = node.module or ""
                # `from . import x` names modules; `from .m import x` names m
                for alias in node.names:
                    if f"{module}.{alias.name}" in names:
                        found.add(f"{module}.{alias.name}")
                    elif module in names:
                        found.add(module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name in names}
        graph[name] = found - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[str]:
    """The modules that can reach themselves through their imports: those in a circle."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph.get(start, ()))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(graph.get(name, ()))
        return seen

    return sorted(name for name in graph if name in reach(name))


def test_no_module_of_core_or_addon_is_in_an_import_circle_lazy_imports_included():
    core = module_graph(ROOT / "core", "tooltap.core")
    addon = module_graph(ROOT / "addon", "tooltap.addon")
    # A package's __init__ re-exports what is below it: imports of the package itself (the
    # table, tooltap.core) by its own modules would close a circle through it, and are counted.
    assert circles(core) == []
    assert circles(addon) == []


def test_the_circle_check_finds_a_lazy_tie(tmp_path):
    (tmp_path / "a.py").write_text("from .b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from .a import y\n")
    (tmp_path / "c.py").write_text("from . import a\n")
    graph = module_graph(tmp_path, "p")
    assert graph == {"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.a"}}
    assert circles(graph) == ["p.a", "p.b"]


def test_no_module_of_core_or_addon_passes_700_lines():
    for path in [*(ROOT / "core").rglob("*.py"), *(ROOT / "addon").rglob("*.py")]:
        lines = len(path.read_text().splitlines())
        assert lines <= 700, (path.relative_to(ROOT), lines)

"""tooltap's build: pure Python, or with the modules every exchange runs through compiled.

With TOOLTAP_COMPILE=1 the modules in COMPILED are compiled by mypyc (part of mypy) into
C extensions, which Python imports in place of their source: a turn's inspection costs about a
third less (bench/README.md). Nothing else changes. It needs mypy, setuptools and a C compiler
where the package is built:

    pip install setuptools mypy
    TOOLTAP_COMPILE=1 pip install --no-build-isolation .

TOOLTAP_COMPILE_OPT sets the C compiler's optimisation level (0 to 3, by default 3, as the image
ships): the suite's check of the compiled modules builds at 0, in less time, since what it checks
is what mypyc compiled, not how fast it runs.

Everything else (the metadata, the packages) is in pyproject.toml.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from setuptools import setup

# core's and the inspector session's modules on every exchange's path that mypyc can compile:
# no pydantic model in them (mypyc compiles none: the records a verdict holds live apart, in
# core/records.py, for this), and no subclass of a class kept interpreted nor a class an
# interpreted one subclasses (one cannot subclass the other). So the dialects' readers come with
# the bases their stream assemblers and socket readers share (assembly, sockets), and every
# dialect whose classes subclass another's comes with it. The plain data made on every exchange
# (Turn, Tool, ToolCall, ...) writes its __init__ out: a dataclass's generated one stays
# interpreted.
COMPILED = (
    "core/inspection.py",
    "core/wire.py",
    "core/turn.py",
    "core/shapes.py",
    "core/parallel.py",
    "core/sse.py",
    "core/lines.py",
    "core/unread.py",
    "core/encoding.py",
    "core/findings.py",
    "core/subsets.py",
    "core/eventstream.py",
    "core/jsonarray.py",
    "core/timing.py",
    "core/schema.py",
    "core/hidden.py",
    "core/built.py",
    "core/jsontext.py",
    "core/arguments.py",
    "core/loop.py",
    "core/definitions.py",
    "core/stream.py",
    "core/assembly.py",
    "core/sockets.py",
    "core/dialects/base.py",
    "core/dialects/responses_items.py",
    "core/dialects/chat.py",
    "core/dialects/cohere.py",
    "core/dialects/converse.py",
    "core/dialects/gemini.py",
    "core/dialects/gemini_live.py",
    "core/dialects/invoke.py",
    "core/dialects/mcp.py",
    "core/dialects/mcp_streams.py",
    "core/dialects/messages.py",
    "core/dialects/ollama.py",
    "core/dialects/realtime.py",
    "core/dialects/responses.py",
    "core/dialects/responses_socket.py",
    "addon/inspection/session.py",
    "addon/inspection/pins.py",
    "addon/inspection/clock.py",
)


def compiled() -> list[object]:
    if os.environ.get("TOOLTAP_COMPILE") != "1":
        return []
    try:
        from mypyc.build import mypycify  # noqa: PLC0415 - only a compiled build needs it
    except ImportError as exc:
        raise SystemExit(
            "TOOLTAP_COMPILE=1 needs mypy where tooltap is built: "
            "pip install setuptools mypy, then pip install --no-build-isolation ."
        ) from exc
    level = os.environ.get("TOOLTAP_COMPILE_OPT", "3")
    if level not in ("0", "1", "2", "3"):
        raise SystemExit(
            f"TOOLTAP_COMPILE_OPT is 0, 1, 2 or 3 (the C optimisation level), not {level!r}"
        )
    # tooltap is this tree under another name (pyproject's package-dir): mypyc names a module
    # by its path, so it reads the tree through a link called tooltap, outside the tree.
    with tempfile.TemporaryDirectory(prefix="tooltap-mypyc-") as stage:
        link = Path(stage, "tooltap")
        link.symlink_to(Path.cwd().resolve(), target_is_directory=True)
        os.environ["MYPYPATH"] = stage
        return mypycify(  # type: ignore[no-any-return]
            [
                "--explicit-package-bases",
                "--namespace-packages",
                # The build environment may lack the runtime dependencies: their types read as
                # Any, which strict mode's checks of ignores, subclasses and returns must allow.
                "--ignore-missing-imports",
                "--follow-imports=silent",
                "--no-warn-unused-ignores",
                "--allow-subclassing-any",
                "--no-warn-return-any",
                *(str(link / path) for path in COMPILED),
            ],
            opt_level=level,
        )


setup(ext_modules=compiled())

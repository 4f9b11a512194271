"""The package layout shows the layers (issue #10): which package may import which, and no cycle.

Every product module is parsed with ``ast``; every ``import``/``from ... import`` counts, including
the ones inside functions (a lazy import is still a dependency).

- ``rag/`` is the pure core: it imports none of ``bot``, ``storage``, ``clients``, ``ragtools``,
  ``standins``, ``tests``.
- ``clients/`` (remote services) imports none of ``bot``, ``storage``, ``ragtools``.
- ``ragtools/`` (build tools) imports none of ``bot``, ``storage``.
- No product module imports ``tests``.
- The import graph of product modules has no cycle.
- ``docs/development.md``'s Layout table names every product module (issue 41), so a new module
  is described where a newcomer looks for it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT_PACKAGES = ("rag", "bot", "storage", "clients", "ragtools", "standins", "scripts")
FORBIDDEN = {
    "rag": {"bot", "storage", "clients", "ragtools", "standins", "tests"},
    "clients": {"bot", "storage", "ragtools", "tests"},
    "ragtools": {"bot", "storage", "tests"},
    "bot": {"tests"},
    "storage": {"tests"},
    "standins": {"tests"},
    "scripts": {"tests"},
}


def module_name(path: Path, root: Path) -> str:
    """``root/bot/telegram/app.py`` -> ``bot.telegram.app``; ``root/rag/__init__.py`` -> ``rag``."""
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under the product packages of ``root``."""
    modules = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                modules[module_name(path, root)] = path
    return modules


def imported_names(source: str, name: str, is_package: bool = False) -> set[str]:
    """Dotted names that module ``name`` imports anywhere in ``source`` (function bodies too).

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a submodule); relative
    imports are resolved against ``name``.
    """
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = ".".join(p for p in (package, node.module) if p)
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the product modules it imports (by their dotted names).

    A script's import of a sibling script (``from evaluate import load_cases``, found through
    ``sys.path``) is an edge to ``scripts.evaluate``.
    """
    graph = {}
    for name, path in modules.items():
        targets = set()
        raw = imported_names(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        for imported in raw:
            if name.startswith("scripts.") and f"scripts.{imported}" in modules:
                imported = f"scripts.{imported}"
            if imported in modules and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None when it is acyclic."""
    state: dict[str, str] = {}  # "open" while on the DFS stack, "done" after
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return stack[stack.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


@pytest.fixture(scope="module")
def modules() -> dict[str, Path]:
    return product_modules()


def test_imports_inside_functions_and_relative_imports_are_found():
    source = (
        "import os\n"
        "from .db import Database\n"
        "def main():\n"
        "    from bot.telegram.app import main as run\n"
        "    import tests.voice_notes\n"
    )
    names = imported_names(source, "storage.inbox")
    assert {"os", "storage.db", "storage.db.Database", "bot.telegram.app",
            "tests.voice_notes"} <= names
    assert "storage" in imported_names("from . import db\n", "storage", is_package=True)


def test_find_cycle_reports_the_loop_and_none_for_a_chain():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_every_product_package_is_parsed(modules):
    packages = {name.partition(".")[0] for name in modules}
    assert packages == set(PRODUCT_PACKAGES)
    assert {"rag.pipeline", "bot.telegram.app", "clients.http", "ragtools.hub"} <= set(modules)


@pytest.mark.parametrize("package", PRODUCT_PACKAGES)
def test_package_imports_only_allowed_layers(modules, package):
    offences = []
    for name, path in modules.items():
        if name.partition(".")[0] != package:
            continue
        raw = imported_names(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        offences += [
            f"{name} imports {imported}"
            for imported in sorted(raw)
            if imported.partition(".")[0] in FORBIDDEN[package]
        ]
    assert offences == []


def test_product_modules_import_no_cycle(modules):
    assert find_cycle(import_graph(modules)) is None


FRONT_ENDS = ("bot.telegram", "bot.whatsapp", "bot.terminal", "bot.web")
"""One folder per channel (issue #23); ``bot.chat`` is what they share."""
CHANNEL_LIBRARIES = ("telegram", "aiohttp", "httpx")


def _is_under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_chat_layer_imports_no_front_end_and_no_channel_library(modules):
    offences = []
    for name, path in modules.items():
        if not _is_under(name, "bot.chat"):
            continue
        raw = imported_names(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        offences += [f"{name} imports {imported}" for imported in sorted(raw)
                     if any(_is_under(imported, p) for p in (*FRONT_ENDS, *CHANNEL_LIBRARIES))]
    assert offences == []


def test_front_ends_do_not_import_each_other(modules):
    offences = []
    for name, path in modules.items():
        own = next((f for f in FRONT_ENDS if _is_under(name, f)), None)
        if own is None:
            continue
        raw = imported_names(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        offences += [f"{name} imports {imported}" for imported in sorted(raw)
                     if any(_is_under(imported, f) for f in FRONT_ENDS if f != own)]
    assert offences == []
    assert {"bot.chat.questions", "bot.telegram.app", "bot.whatsapp.app",
            "bot.terminal.console", "bot.web.app"} <= set(modules)


ANSWER_STAGE = "rag.answer"
"""The answer decision's one home (issue 41): selection, reading and the gate."""
ANSWER_STAGE_USERS = ("rag.pipeline", "rag.prepared", "rag.generative", "rag.answering")
"""The rag modules above the answer stage, which may use it."""


def test_the_answer_stage_is_built_on_rag_and_nothing_in_rag_below_it_imports_it(modules):
    """``rag.answer`` builds on the modules below it (selection, the readers, types, text): none
    of those imports it back, and it imports nothing above it (the pipeline). In ``rag``, only
    the modules above it use it."""
    assert {f"{ANSWER_STAGE}.gate", f"{ANSWER_STAGE}.stage", f"{ANSWER_STAGE}.readers",
            f"{ANSWER_STAGE}.signals"} <= set(modules)
    offences = []
    for name, path in modules.items():
        if not _is_under(name, "rag"):
            continue
        raw = imported_names(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        if _is_under(name, ANSWER_STAGE):
            offences += [f"{name} imports {imported}" for imported in sorted(raw)
                         if any(_is_under(imported, user) for user in ANSWER_STAGE_USERS)]
        elif name not in ANSWER_STAGE_USERS:
            offences += [f"{name} imports {imported}" for imported in sorted(raw)
                         if _is_under(imported, ANSWER_STAGE)]
    assert offences == []


DEVELOPMENT_DOC = ROOT / "docs" / "development.md"
LAYOUT_PACKAGES = ("rag", "bot", "storage", "clients", "ragtools", "standins", "scripts")
"""The packages whose every module docs/development.md's Layout table names."""


def layout_rows(markdown: str) -> dict[str, str]:
    """First cell -> the whole row, for the table of the ``## Layout`` section (``| `rag/` |
    what |`` gives ``{"rag/": "| `rag/` | what |"}``)."""
    match = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", markdown, re.MULTILINE | re.DOTALL)
    section = match.group(1) if match else ""
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            rows[line.split("|")[1].strip().strip("`")] = line
    return rows


def is_named(row: str, package: str, relative: Path) -> bool:
    """Whether ``row`` names the module at ``relative`` (a path under ``package``): its file name
    (``followup.py``) or its path (``rag/answer/gate.py``) as a word of its own; a subpackage's
    ``__init__.py`` by its folder (``answer/``); the package's own ``__init__.py`` by the row."""
    if relative.name == "__init__.py":
        if relative.parent == Path("."):
            return True
        names = [f"{relative.parent.name}/", f"{package}/{relative.parent.as_posix()}/"]
    else:
        names = [relative.name, f"{package}/{relative.as_posix()}"]
    return any(re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w])", row) for name in names)


def modules_missing_from_layout(markdown: str, root: Path = ROOT) -> list[str]:
    """Every ``.py`` file under :data:`LAYOUT_PACKAGES` of ``root`` that its package's row of
    the Layout table does not name (a package without a row: all of its modules)."""
    rows = layout_rows(markdown)
    missing = []
    for package in LAYOUT_PACKAGES:
        row = rows.get(f"{package}/", "")
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root / package)
            if "__pycache__" not in path.parts and not is_named(row, package, relative):
                missing.append(f"{package}/{relative.as_posix()}")
    return missing


def test_a_module_is_named_by_its_file_name_or_path_in_its_own_row():
    doc = ("## Layout\n\n| path | what |\n|---|---|\n"
           "| `rag/` | `followup.py`, **`answer/`** (`rag/answer/gate.py`) |\n"
           "| `bot/` | `ratelimit.py` and the `chat/` folder |\n\n## Next\n| `scripts/` | x |\n")
    rows = layout_rows(doc)
    assert set(rows) == {"rag/", "bot/"}
    assert is_named(rows["rag/"], "rag", Path("followup.py"))
    assert is_named(rows["rag/"], "rag", Path("answer/gate.py"))
    assert is_named(rows["rag/"], "rag", Path("answer/__init__.py"))
    assert is_named(rows["bot/"], "bot", Path("chat/__init__.py"))
    assert not is_named(rows["rag/"], "rag", Path("answer/stage.py"))
    assert not is_named(rows["rag/"], "rag", Path("up.py"))  # not inside followup.py
    assert not is_named(rows["bot/"], "bot", Path("limit.py"))  # not inside ratelimit.py


def test_every_product_module_is_named_in_the_layout_table():
    assert modules_missing_from_layout(DEVELOPMENT_DOC.read_text(encoding="utf-8")) == []

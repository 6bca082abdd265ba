"""docs/architecture.md's layers against the code: no module imports, at the top of its file, a later layer."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orchestrator"
ROW = re.compile(r"^\| (?P<layer>[a-z ]+) \| [^|]+ \| (?P<modules>(?:`[\w.]+` ?)+) \|$")


def layers() -> dict[str, int]:
    """Module -> its layer's position, from the table in docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [m for m in map(ROW.match, text.splitlines()) if m]
    assert len(rows) >= 5, "docs/architecture.md lost its layer table"
    found: dict[str, int] = {}
    for position, row in enumerate(rows):
        for name in re.findall(r"`([\w.]+)`", row["modules"]):
            assert name not in found, f"{name} stands in two layers"
            found[name] = position
    return found


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name below ``orchestrator`` (the package itself: ``__init__``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def top_level_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports at the top of its file (TYPE_CHECKING blocks and functions left out)."""
    package = [] if name == "__init__" else name.split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package[: len(package) - node.level + 1]
        target = [*base, *(node.module.split(".") if node.module else [])]
        candidates = [".".join([*target, alias.name]) for alias in node.names]  # from .x import submodule
        if node.module:  # from .x import name: module x itself ("from . import chain" names no module of its own)
            candidates.append(".".join(target))
        found.update(c for c in candidates if c in known)
    found.discard(name)
    return found


def test_every_module_stands_in_one_layer_of_the_picture():
    assert set(modules()) == set(layers()), "add new modules to docs/architecture.md's table (and drop gone ones)"


def test_no_module_imports_a_later_layer_at_the_top_of_its_file():
    where, found = layers(), modules()
    upward = [
        f"{name} ({where[name]}) imports {target} ({where[target]})"
        for name, path in sorted(found.items())
        for target in sorted(top_level_imports(name, path, set(found)))
        if where[target] > where[name]
    ]
    assert upward == []


def test_the_check_sees_an_upward_import(tmp_path):
    # The checker itself: a foundation module importing the manager is caught.
    path = tmp_path / "errors.py"
    path.write_text("from .manager import Manager\nfrom . import limits\n", encoding="utf-8")
    assert top_level_imports("errors", path, {"manager", "limits", "errors"}) == {"manager", "limits"}
    assert layers()["manager"] > layers()["errors"]

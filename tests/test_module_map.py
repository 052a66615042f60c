"""`docs/contributing.md`'s module map names every module under `jaxsolve/` (issue 25 item 5).

The map is the next engineer's first look at the package; a module added without an entry
makes it wrong without anyone noticing (two blackbox modules were missing once). Each entry
must carry the module's docstring summary (its first paragraph), the one concern the module
holds, so that a rewritten summary is not left stale in the map.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parents[1]
MAP = (ROOT / "docs" / "contributing.md").read_text()
MODULES = sorted(p for p in (ROOT / "jaxsolve").rglob("*.py") if p.name != "__init__.py")


def test_modules_found():
    assert len(MODULES) > 100


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_in_map_with_its_first_docstring_line(path):
    folder = path.parent.relative_to(ROOT).as_posix()
    section = MAP.split(f"* `{folder}/`", 1)
    assert len(section) == 2, f"no section for {folder}/ in docs/contributing.md"
    body = section[1].split("\n* `", 1)[0]
    entry = [line for line in body.splitlines() if line.strip().startswith(f"* `{path.name}`")]
    assert entry, f"{path.relative_to(ROOT)} missing from the module map"
    summary = ast.get_docstring(ast.parse(path.read_text())).split("\n\n")[0]
    summary = " ".join(line.strip() for line in summary.splitlines()).replace("``", "`")
    summary = summary.rstrip(".")
    assert entry[0].endswith(summary), f"{path.name}: map {entry[0]!r}, docstring {summary!r}"

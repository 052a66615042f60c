"""Rewrite Sphinx roles in docstrings as the Markdown mkdocstrings renders.

``:math:`x``` -> ``$x$``; ``:func:`~a.b``` (and ``:class:``, ``:meth:``, ``:mod:``,
``:attr:``, ``:data:``, ``:exc:``) -> a code span of the name (the last part after
``~``); a ``.. math::`` block -> a ``$$ ... $$`` block at the same indentation (in an
``aligned`` environment when it has ``&`` or ``\\\\`` rows, as Sphinx's implicit split).

    python tools/sphinx_to_md.py FILE_OR_DIR ...   # rewrites in place, prints counts
"""

from __future__ import annotations

import pathlib
import re
import sys

_ROLE = re.compile(r":(func|class|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")
_MATH = re.compile(r":math:`([^`]+)`")


def _name(m: re.Match) -> str:
    target = m.group(3).strip()
    if m.group(2) == "~":
        target = target.split(".")[-1]
    return f"`{target}`"


def _blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(\s*)\.\. math::\s*(.*)$", line)
        if not m:
            out.append(line)
            i += 1
            continue
        indent, first = m.group(1), m.group(2).strip()
        body = [first] if first else []
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(indent + " ")):
            body.append(lines[i].strip())
            i += 1
        blank_after = bool(body) and not body[-1]
        while body and not body[-1]:
            body.pop()
        while body and not body[0]:
            body.pop(0)
        # Sphinx wraps a multi-line block in an implicit split; MathJax needs it spelt out.
        if any("&" in b or b.rstrip().endswith("\\\\") for b in body) and not any(
            "\\begin{" in b for b in body
        ):
            body = ["\\begin{aligned}", *body, "\\end{aligned}"]
        # a blank line after the block only where one was (none before a closing quote)
        trailing_blank = blank_after and i < len(lines)
        out.append(f"{indent}$$")
        out.extend(f"{indent}{b}" if b else "" for b in body)
        out.append(f"{indent}$$")
        if trailing_blank:
            out.append("")
    return "\n".join(out)


def convert(text: str) -> tuple[str, int]:
    n = len(_ROLE.findall(text)) + len(_MATH.findall(text)) + text.count(".. math::")
    text = _blocks(text)
    # arithmatex takes a `$` next to a space as text: no space inside the delimiters
    text = _MATH.sub(lambda m: f"${m.group(1).strip()}$", text)
    text = _ROLE.sub(_name, text)
    return text, n


def main(paths: list[str]) -> None:
    files = []
    for p in map(pathlib.Path, paths):
        files += sorted(p.rglob("*.py")) + sorted(p.rglob("*.md")) if p.is_dir() else [p]
    total = 0
    for f in files:
        src = f.read_text()
        new, n = convert(src)
        if n:
            f.write_text(new)
            total += n
            print(f"{f}: {n}")
    print(f"{total} roles rewritten")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Check the built docs site (``site/``) in a real headless browser (Chromium).

``python tools/check_docs_browser.py --out DIR`` (``make docs-browser``) serves the
built site on a localhost port from a thread, loads every page with
``chromium --headless --dump-dom`` (scripts run, so KaTeX has rendered the math) and
checks the rendered DOM of each page:

- math: every ``.arithmatex`` element (pymdownx.arithmatex's output) holds a rendered
  ``.katex`` element, no ``.katex-error`` is left, and no raw ``\\(``, ``\\[`` or ``$$``
  is left in the page's text outside code;
- no raw Sphinx role (``:math:``, ``:func:``, ``:class:``, ``:meth:``, ...) in the text;
- no script or stylesheet loaded from another host (the site must render offline);
- the top navigation lists mkdocs.yml's ``nav`` titles in its order.

It then writes ``home.png`` and ``qp.png`` (1280x1600 screenshots of the home page and
the QP family page) into DIR and checks neither is blank. Exits 1 with one line per
failure, 2 when no Chromium is found.
"""

from __future__ import annotations

import argparse
import functools
import html.parser
import http.server
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROLES = re.compile(r":(math|func|class|meth|attr|mod|obj|data|exc|ref|py:\w+):")
RAW_MATH = ("\\(", "\\[", "$$")
# In a Python docstring that is not a raw string, \f \t \b \a \v in TeX (\frac, \top,
# \beta, ...) become control characters: KaTeX then fails or silently drops the command.
CONTROL = re.compile("[\x07\x08\x0b\x0c\t]")
ESCAPES = {"\x07": "\\a", "\x08": "\\b", "\x0b": "\\v", "\x0c": "\\f", "\t": "\\t"}
VOID = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
    "source", "track", "wbr",
}  # fmt: skip
# text inside these is code or KaTeX's hidden MathML copy of the TeX source
SKIP_TEXT = {"script", "style", "code", "pre", "annotation", "textarea", "noscript"}
SCREENSHOTS = {"home.png": "", "qp.png": "qp/"}


class Page(html.parser.HTMLParser):
    """What the checks need from one rendered page, in one pass over its DOM."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # (tag, classes, flags) of the open elements
        self.arithmatex = 0  # .arithmatex elements
        self.unrendered = []  # text of .arithmatex elements with no .katex inside
        self.katex_errors = []
        self.control = []  # formulas holding a control character (see check_page)
        self.text = []  # visible prose text (not code, not MathML)
        self.all_text = []  # every text node except scripts and styles
        self.nav = []  # link texts in the first ul.navbar-nav, in order
        self.external = []  # src/href of scripts and stylesheets on another host
        self._nav_done = False

    def _flag(self, name):
        return any(name in flags for _, _, flags in self.stack)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        flags = set()
        if "arithmatex" in classes:
            self.arithmatex += 1
            flags |= {"arithmatex"}
            self._math = {"katex": False, "text": []}
        if "katex" in classes or "katex-display" in classes:
            if self._flag("arithmatex"):
                self._math["katex"] = True
        if "katex-error" in classes:
            flags |= {"katex-error"}
            self.katex_errors.append(a.get("title", ""))
        if tag in SKIP_TEXT or "katex-mathml" in classes:
            flags |= {"skip"}
        if tag in ("script", "style"):
            flags |= {"hidden"}
        if tag == "ul" and "navbar-nav" in classes and not self._nav_done:
            flags |= {"nav"}
        if tag == "a" and self._flag("nav"):
            flags |= {"navlink"}
            self.nav.append("")
        url = a.get("src") if tag == "script" else None
        if tag == "link" and "stylesheet" in (a.get("rel") or ""):
            url = a.get("href")
        if (
            url
            and re.match(r"(https?:)?//", url)
            and not re.match(r"(https?:)?//(127\.0\.0\.1|localhost)[:/]", url)
        ):
            self.external.append(url)
        if tag not in VOID:
            self.stack.append((tag, classes, flags))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        # pop to the matching open tag (tolerates stray end tags)
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                break
        else:
            return
        while len(self.stack) > i:
            _, _, flags = self.stack.pop()
            if "arithmatex" in flags:
                tex = "".join(self._math["text"]).strip()
                if not self._math["katex"]:
                    self.unrendered.append(tex)
                if CONTROL.search(tex):
                    self.control.append(tex)
            if "nav" in flags:
                self._nav_done = True

    def handle_data(self, data):
        if self._flag("arithmatex"):
            self._math["text"].append(data)
        if self._flag("navlink"):
            self.nav[-1] += data.strip()
        if not self._flag("hidden"):
            self.all_text.append(data)
        if not self._flag("skip"):
            self.text.append(data)


def nav_titles(mkdocs_yml: pathlib.Path) -> list[str]:
    """mkdocs.yml's nav titles, sections before their pages, in order."""
    import yaml

    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold !!python/name tags
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    nav = yaml.load(mkdocs_yml.read_text(), Loader=Loader).get("nav") or []

    def walk(items):
        for item in items:
            if isinstance(item, dict):
                for title, value in item.items():
                    yield title
                    if isinstance(value, list):
                        yield from walk(value)

    return list(walk(nav))


def serve(site: pathlib.Path):
    """An http server for ``site`` on a free localhost port, in a daemon thread."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def chromium_cmd(exe: str, budget_ms: int, profile: str) -> list[str]:
    return [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={budget_ms}",
    ]


def dump_dom(cmd: list[str], url: str, timeout: float) -> str:
    proc = subprocess.run(
        [*cmd, "--dump-dom", url], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0 or "<html" not in proc.stdout:
        tail = proc.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"chromium --dump-dom {url} exited {proc.returncode}: {tail}")
    return proc.stdout


def check_page(name: str, dom: str, expected_nav: list[str]) -> list[str]:
    """The failures on one rendered page, each a line naming the page."""
    page = Page()
    page.feed(dom)
    page.close()
    fails = []
    if page.unrendered:
        fails.append(
            f"{name}: {len(page.unrendered)} of {page.arithmatex} formulas not rendered"
            f" by KaTeX, first: {page.unrendered[0][:80]!r}"
        )
    for tex in page.control:
        ch = CONTROL.search(tex).group(0)
        fails.append(
            f"{name}: formula {tex[:60]!r} holds {ch!r}: a {ESCAPES[ch]}... in a docstring"
            " that is not a raw string (prefix it with r)"
        )
    for err in page.katex_errors[:3]:
        fails.append(f"{name}: KaTeX error: {err[:160]}")
    if len(page.katex_errors) > 3:
        fails.append(f"{name}: ... {len(page.katex_errors)} KaTeX errors in all")
    text = "".join(page.text)
    for raw in RAW_MATH:
        i = text.find(raw)
        if i >= 0:
            snippet = " ".join(text[max(0, i - 30) : i + 50].split())
            fails.append(f"{name}: raw math {raw!r} in the rendered text: ...{snippet}...")
    m = ROLES.search("".join(page.all_text))
    if m:
        fails.append(f"{name}: raw Sphinx role {m.group(0)!r} in the rendered text")
    for url in page.external:
        fails.append(f"{name}: loads {url} from another host (does not render offline)")
    if page.nav != expected_nav:
        fails.append(
            f"{name}: navigation {page.nav[:6]}... is not mkdocs.yml's nav "
            f"{expected_nav[:6]}... ({len(page.nav)} vs {len(expected_nav)} entries)"
        )
    return fails


def check_png(path: pathlib.Path, size: tuple[int, int]) -> list[str]:
    """Failures of a screenshot: missing, wrong size, or blank (one colour)."""
    import numpy as np
    from matplotlib import image

    if not path.is_file() or path.stat().st_size == 0:
        return [f"{path}: no screenshot written"]
    img = np.asarray(image.imread(path), dtype=float)[..., :3]
    fails = []
    if (img.shape[1], img.shape[0]) != size:
        fails.append(f"{path}: size {img.shape[1]}x{img.shape[0]}, expected {size[0]}x{size[1]}")
    gray = img.mean(axis=-1)
    background = np.median(gray)
    ink = float(np.mean(np.abs(gray - background) > 0.1))
    if gray.std() < 0.02 or ink < 0.005:
        fails.append(f"{path}: blank (pixel std {gray.std():.4f}, {ink:.2%} non-background)")
    return fails


def find_chromium(given: str | None) -> str | None:
    for name in (given, os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for home.png and qp.png")
    parser.add_argument("--site", default=str(ROOT / "site"), help="the built site")
    parser.add_argument("--config", default=str(ROOT / "mkdocs.yml"), help="for the nav")
    parser.add_argument("--chromium", default=None, help="browser executable")
    parser.add_argument("--budget-ms", type=int, default=10000, help="virtual time per page")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds per browser run")
    ns = parser.parse_args(argv)
    site, out = pathlib.Path(ns.site), pathlib.Path(ns.out)
    exe = find_chromium(ns.chromium)
    if exe is None:
        print("check_docs_browser: no chromium found (apt-get install chromium)", file=sys.stderr)
        return 2
    pages = sorted(
        p.relative_to(site).parent.as_posix()
        for p in site.rglob("index.html")
        if p.relative_to(site).parts[0] not in ("search", "assets", "js", "css")
    )
    if not pages:
        print(f"check_docs_browser: no pages under {site} (run mkdocs build)", file=sys.stderr)
        return 1
    expected_nav = nav_titles(pathlib.Path(ns.config))
    out.mkdir(parents=True, exist_ok=True)
    server, base = serve(site)
    fails = []
    try:
        with tempfile.TemporaryDirectory() as profile:
            cmd = chromium_cmd(exe, ns.budget_ms, profile)
            total_math = 0
            for rel in pages:
                name = "/" + ("" if rel == "." else rel + "/")
                url = base + name.lstrip("/")
                try:
                    dom = dump_dom(cmd, url, ns.timeout)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    fails.append(f"{name}: {exc}")
                    continue
                page_fails = check_page(name, dom, expected_nav)
                fails += page_fails
                n = dom.count('class="katex"')
                total_math += n
                print(f"{name}: {n} formulas rendered, {'ok' if not page_fails else 'FAILED'}")
            for png, rel in SCREENSHOTS.items():
                path = out / png
                path.unlink(missing_ok=True)
                shot = [*cmd, "--window-size=1280,1600", f"--screenshot={path.resolve()}"]
                try:
                    subprocess.run(
                        [*shot, base + rel], capture_output=True, timeout=ns.timeout, check=False
                    )
                except subprocess.TimeoutExpired:
                    fails.append(f"{path}: chromium --screenshot timed out")
                    continue
                fails += check_png(path, (1280, 1600))
                print(f"screenshot: {path}")
    finally:
        server.shutdown()
    if fails:
        print(f"\ncheck_docs_browser: {len(fails)} failures:", file=sys.stderr)
        for line in fails:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"check_docs_browser: {len(pages)} pages ok, {total_math} formulas rendered")
    return 0


if __name__ == "__main__":
    sys.exit(main())

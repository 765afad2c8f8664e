"""The real validators: epubcheck, Ace by DAISY, qpdf, and poppler's pdftotext, pdfimages, pdffonts and
pdfinfo. A missing one skips its tests loudly on a developer's machine and fails the run under CI=true,
where .ci/run has installed them."""

from __future__ import annotations

import collections
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest


def _need(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if found is None:
        reason = f"{tool} is not installed (Debian package {package}; .ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def epubcheck(path: Path) -> str:
    """epubcheck's report. Debian installs it as an executable jar, so it is run through java."""
    tool = _need("epubcheck", "epubcheck")
    run = subprocess.run(["java", "-jar", tool, str(path)], capture_output=True, text=True, timeout=300)
    return run.stdout + run.stderr


def qpdf_check(path: Path) -> subprocess.CompletedProcess[str]:
    tool = _need("qpdf", "qpdf")
    return subprocess.run([tool, "--check", str(path)], capture_output=True, text=True, timeout=300)


def pdftotext(path: Path, *extra: str) -> str:
    tool = _need("pdftotext", "poppler-utils")
    return subprocess.run([tool, *extra, str(path), "-"], capture_output=True, text=True, check=True).stdout


@dataclass(frozen=True)
class Word:
    """A word pdftotext found, where it is on its page (pt from the page's top left), and the page's size."""

    page: int
    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    width: float
    height: float


def placed_words(path: Path) -> list[Word]:
    """Every word of a PDF and where it is set, even past its page's edge. pdftotext reads only what lies on
    a page (text set past the edge is simply not there), so it reads a copy whose every page is widened by
    its own size on each side, and each word is given back in the page's own coordinates."""
    import pikepdf

    with tempfile.TemporaryDirectory() as tmp:
        widened = Path(tmp) / "widened.pdf"
        sizes = []
        with pikepdf.open(path) as pdf:
            for page in pdf.pages:
                x0, y0, x1, y1 = (float(v) for v in page.mediabox)
                w, h = x1 - x0, y1 - y0
                sizes.append((w, h))
                page.obj.MediaBox = pikepdf.Array([x0 - w, y0 - h, x1 + w, y1 + h])
                for box in ("/CropBox", "/TrimBox", "/BleedBox", "/ArtBox"):
                    if box in page.obj:
                        del page.obj[box]
            pdf.save(widened)
        layout = pdftotext(widened, "-bbox")
    words = []
    for n, page in enumerate(layout.split("<page ")[1:]):
        w, h = sizes[n]
        for x0, y0, x1, y1, word in re.findall(
            r'xMin="([-\d.]+)" yMin="([-\d.]+)" xMax="([-\d.]+)" yMax="([-\d.]+)">([^<]*)</word>', page
        ):
            words.append(
                Word(n, float(x0) - w, float(y0) - h, float(x1) - w, float(y1) - h, html.unescape(word), w, h)
            )
    return words


def text_characters(text: str) -> collections.Counter[str]:
    """The characters a reader finds in `text`, each as often as it is there: compatibility forms folded
    (NFKC: a ligature is its letters, whichever way a reader gives it back), white space left out."""
    return collections.Counter(ch for ch in unicodedata.normalize("NFKC", text) if not ch.isspace())


def manuscript_text(manuscript: str) -> str:
    """The text of a manuscript as Bindery's Markdown reads it, chapter by chapter (what markdown syntax
    consumes left out): the oracle every format's text is held to."""
    from bindery.engine import markup
    from bindery.manuscript import cut_text

    md = markup.parser()
    parts: list[str] = []
    for _, chapter in cut_text(manuscript):
        for token in md.parse(chapter, {}):
            if token.type in ("fence", "code_block", "html_block"):
                parts.append(token.content)
            for child in token.children or []:
                if child.type in ("text", "text_special", "code_inline", "html_inline"):
                    parts.append(child.content)
                parts += [c.content for c in child.children or [] if c.type == "text"]  # an image's alt
            parts.append(" ")
    return "".join(parts)


def pdffonts(path: Path) -> list[dict[str, str]]:
    """`pdffonts`: one row a font in the PDF, with its name, type and whether it is embedded ("emb")."""
    tool = _need("pdffonts", "poppler-utils")
    lines = subprocess.run([tool, str(path)], capture_output=True, text=True, check=True).stdout.splitlines()
    rows = []
    for line in lines[2:]:
        # name, type (may hold spaces), encoding, emb, sub, uni, object, id: the last six are single words
        words = line.split()
        rows.append({"name": words[0], "emb": words[-5], "sub": words[-4], "uni": words[-3]})
    return rows


def pdfinfo(path: Path) -> dict[str, str]:
    """`pdfinfo`'s fields (Title, Tagged, Pages, Page size, ...)."""
    tool = _need("pdfinfo", "poppler-utils")
    out = subprocess.run([tool, str(path)], capture_output=True, text=True, check=True).stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if v}


def pdfimages(path: Path) -> list[dict[str, str]]:
    """`pdfimages -list`: one row an image placed in the PDF (page, width, height, type, ...)."""
    tool = _need("pdfimages", "poppler-utils")
    lines = subprocess.run([tool, "-list", str(path)], capture_output=True, text=True, check=True).stdout
    header, _, *rows = lines.splitlines()
    names = header.split()
    return [dict(zip(names, row.split(), strict=False)) for row in rows]


ACE_DIR = Path(os.environ.get("BINDERY_ACE_DIR", Path(__file__).resolve().parents[1] / ".cache" / "ace"))


def ace(path: Path, out: Path) -> tuple[list[str], dict[str, object]]:
    """Ace by DAISY's verdict on an EPUB: each violation as "rule (impact): description", and the whole
    report. Ace runs its checks in Chromium; Debian's is used, so Puppeteer downloads none."""
    tool = ACE_DIR / "node_modules" / ".bin" / "ace-cli"
    browser = shutil.which("chromium")
    if not tool.exists() or browser is None:
        reason = (
            f"Ace by DAISY is not installed in {ACE_DIR} (make {ACE_DIR}/.installed), or chromium is missing"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    env = {**os.environ, "PUPPETEER_EXECUTABLE_PATH": browser}
    run = subprocess.run(
        [str(tool), "--silent", "--force", "--outdir", str(out), str(path)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    report_path = out / "report.json"
    assert report_path.exists(), f"Ace wrote no report: {run.stdout[-1000:]} {run.stderr[-1000:]}"
    report = json.loads(report_path.read_text())
    violations = []
    for document in report["assertions"]:
        for check in document.get("assertions", []):
            if check["earl:result"]["earl:outcome"] != "pass":
                test = check["earl:test"]
                violations.append(
                    f"{test['dct:title']} ({test['earl:impact']}) in {document['earl:testSubject']['url']}: "
                    f"{check['earl:result'].get('dct:description', '')[:200]}"
                )
    return violations, report


def structure_problems(path: Path) -> list[str]:
    """What is wrong with a tagged PDF's structure tree, read with pikepdf: each element's parent is the
    one that holds it; every marked-content id an element claims is the one its page's ParentTree entry
    gives back, and the other way round; every annotation's StructParent leads to an element that holds
    it; element IDs are unique; and the tree has one Document at its root. An empty list is a sound tree.
    (A joined PDF whose pieces' keys collided would fail the round trip.)"""
    import pikepdf

    problems: list[str] = []
    with pikepdf.open(path) as pdf:
        pages = {page.objgen: n for n, page in enumerate(pdf.pages)}
        root = pdf.Root.StructTreeRoot
        kids = root.K if isinstance(root.K, pikepdf.Array) else [root.K]
        if [k.get("/S") for k in kids] != [pikepdf.Name.Document]:
            problems.append(f"the root holds {[str(k.get('/S')) for k in kids]}, not one Document")
        tree: dict[int, pikepdf.Object] = {}

        def numbers(node: pikepdf.Object) -> None:
            pairs = list(node.get("/Nums", []))
            for i in range(0, len(pairs), 2):
                tree[int(pairs[i])] = pairs[i + 1]
            for kid in node.get("/Kids", []):
                numbers(kid)

        numbers(root.ParentTree)
        if tree and int(root.ParentTreeNextKey) <= max(tree):
            problems.append("ParentTreeNextKey is not past every key")
        claimed: dict[tuple[int, int], tuple[int, int]] = {}  # (page, mcid) -> element
        objects: dict[tuple[int, int], tuple[int, int]] = {}  # annotation -> element
        ids: set[str] = set()
        stack = [(kid, root) for kid in kids]
        while stack:
            element, parent = stack.pop()
            if element.get("/P") is None or element.P.objgen != parent.objgen:
                problems.append(f"{element.get('/S')} {element.objgen}: /P is not its parent")
            if "/ID" in element:
                name = str(element.ID)
                if name in ids:
                    problems.append(f"ID {name!r} is used twice")
                ids.add(name)
            page = pages.get(element.Pg.objgen) if "/Pg" in element else None
            if "/Pg" in element and page is None:
                problems.append(f"{element.S} {element.objgen}: /Pg is not a page of this document")
            content = element.get("/K")
            held = content if isinstance(content, pikepdf.Array) else [] if content is None else [content]
            for kid in held:
                if isinstance(kid, int):
                    claimed[(page if page is not None else -1, int(kid))] = element.objgen
                elif kid.get("/Type") == pikepdf.Name.MCR:
                    on = pages.get(kid.Pg.objgen, -1) if "/Pg" in kid else page
                    claimed[(on if on is not None else -1, int(kid.MCID))] = element.objgen
                elif kid.get("/Type") == pikepdf.Name.OBJR:
                    objects[kid.Obj.objgen] = element.objgen
                else:
                    stack.append((kid, element))
        for n, page in enumerate(pdf.pages):
            if "/StructParents" in page.obj:
                entry = tree.get(int(page.obj.StructParents))
                if not isinstance(entry, pikepdf.Array):
                    problems.append(f"page {n + 1}: its StructParents key has no array in the ParentTree")
                    continue
                for mcid, element in enumerate(entry):
                    if isinstance(element, pikepdf.Dictionary) and claimed.get((n, mcid)) != element.objgen:
                        problems.append(f"page {n + 1}, mcid {mcid}: the ParentTree and the element disagree")
            for annot in page.obj.get("/Annots", []):
                if "/StructParent" in annot:
                    element = tree.get(int(annot.StructParent))
                    if element is None or objects.get(annot.objgen) != element.objgen:
                        problems.append(f"page {n + 1}: an annotation's StructParent leads elsewhere")
        for (n, mcid), element in claimed.items():
            parents = tree.get(int(pdf.pages[n].obj.get("/StructParents", -1))) if n >= 0 else None
            if parents is None or mcid >= len(parents) or parents[mcid].objgen != element:
                problems.append(f"page {n + 1}, mcid {mcid}: its element is not the one the ParentTree names")
    return problems[:20]


def pandoc(*args: str, text: str | None = None) -> str:
    """What a current pandoc (PyPI's pypandoc-binary, the reference for what markdown means: Debian's is
    2.17) writes, reading `text` or the files `args` name."""
    import pytest

    tool = str(pytest.importorskip("pypandoc").get_pandoc_path())
    return subprocess.run(
        [tool, *args], input=text, capture_output=True, text=True, check=True, timeout=300
    ).stdout

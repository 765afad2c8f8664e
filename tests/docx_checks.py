"""What the docx's readers make of it: LibreOffice (headless, converting to PDF), pandoc (its AST of the
document, against its AST of the manuscript) and the document's own text. Each tool comes from Debian's
packages (tests/system_packages.sh); a missing one skips loudly, and fails the run under CI=true."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any

from tests.validators import _need

# The manuscript's dialect as pandoc names it: CommonMark, tables, strikethrough and footnotes.
MANUSCRIPT_DIALECT = "commonmark+pipe_tables+strikeout+footnotes"


def libreoffice_to_pdf(documents: Iterable[Path], outdir: Path) -> subprocess.CompletedProcess[str]:
    """Every document converted to PDF by one headless LibreOffice (a start costs seconds; the conversions
    share it), with a profile of its own, so a LibreOffice already running elsewhere is never reused."""
    tool = _need("soffice", "libreoffice-writer-nogui")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [tool, f"-env:UserInstallation=file://{profile}", "--headless", "--norestore",
             "--convert-to", "pdf", "--outdir", str(outdir), *map(str, documents)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip


def pandoc_ast(path: Path | None, reader: str, text: str | None = None) -> dict[str, Any]:
    tool = _need("pandoc", "pandoc")
    args = [tool, "-f", reader, "-t", "json"] + ([str(path)] if path is not None else [])
    run = subprocess.run(args, input=text, capture_output=True, text=True, check=True, timeout=300)
    ast: dict[str, Any] = json.loads(run.stdout)
    return ast


def pandoc_elements(ast: Any, kind: str) -> list[Any]:
    """The contents (`c`) of each element of `kind` in a pandoc JSON document, in document order."""
    found: list[Any] = []
    todo = [ast]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if node.get("t") == kind:
                found.append(node.get("c"))
            todo.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            todo.extend(reversed(node))
    return found


def _string(nodes: Any) -> str:
    """pandoc's stringify: the text of inline elements."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            kind = node.get("t")
            if kind == "Str":
                out.append(node["c"])
            elif kind in ("Space", "SoftBreak", "LineBreak"):
                out.append(" ")
            elif kind == "Code":
                out.append(node["c"][1])
            elif kind == "Note":
                return
            elif kind == "Image":
                walk(node["c"][1])
            elif "c" in node:
                walk(node["c"])

    walk(nodes)
    return " ".join("".join(out).split())


@dataclass
class Shape:
    """What a reader must find of a book: its headings by level, its notes' text, its images' alt text (and
    their targets), its tables' sizes, and how deep its lists nest."""

    headings: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    tables: list[tuple[int, int]] = field(default_factory=list)  # (rows with the header, columns)
    list_depth: int = 0


def shape(ast: dict[str, Any]) -> Shape:
    found = Shape()

    def walk(node: Any, depth: int = 0) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, depth)
            return
        if not isinstance(node, dict):
            return
        kind, content = node.get("t"), node.get("c")
        if kind == "Header":
            found.headings.append((content[0], _string(content[2])))
        elif kind == "Note":
            found.notes.append(_string(content))
        elif kind == "Image":
            found.images.append((_string(content[1]), content[2][0]))
        elif kind == "Table":
            head, bodies = content[3], content[4]
            rows = len(head[1]) + sum(len(b[3]) for b in bodies)
            columns = len(content[2])
            found.tables.append((rows, columns))
        elif kind in ("BulletList", "OrderedList"):
            found.list_depth = max(found.list_depth, depth + 1)
            walk(content, depth + 1)
            return
        if content is not None:
            walk(content, depth)

    walk(ast["blocks"])
    return found


def document_text(path: Path) -> str:
    """The text of a docx's body and notes, as a reader finds it: each w:t's characters, unescaped."""
    with zipfile.ZipFile(path) as package:
        xml = package.read("word/document.xml").decode() + package.read("word/footnotes.xml").decode()
    xml = re.sub(r"<w:tab/>", "\t", xml)
    return " ".join(unescape(m) for m in re.findall(r"<w:t(?: [^>]*)?>([^<]*)</w:t>", xml))

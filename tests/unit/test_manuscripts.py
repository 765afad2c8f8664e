"""A manuscript file's front matter, read with pandoc's keys, and the images its text names: every mistake
names the file, the line and the field, before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from bindery_cli import manuscripts
from bindery_cli.manuscripts import FileError

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


def _write(folder: Path, text: str, *images: str) -> Path:
    for name in images:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(PNG)
    path = folder / "book.md"
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(FileError) as raised:
        manuscripts.read(path)
    return str(raised.value)


def test_pandocs_keys_become_the_title_and_bindery_metadata(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "---\ntitle: Die Karte der Küste\nauthor: [A. One, B. Two]\nlang: de\nidentifier: '9781402894626'\n"
        "publisher: P\ndescription: D\nsubject: Coasts\ndate: 2026-06-28\nrights: R\n"
        "cover-image: art/cover.png\ntoc: true\n---\n# One\n\ntext\n",
        "art/cover.png",
    )
    read = manuscripts.read(path)
    assert read.title == "Die Karte der Küste"
    assert read.metadata == {
        "authors": ["A. One", "B. Two"],
        "language": "de",
        "identifier": "9781402894626",
        "publisher": "P",
        "description": "D",
        "subjects": ["Coasts"],
        "published": "2026-06-28",
        "rights": "R",
        "cover": "art/cover.png",
    }
    assert read.text == "# One\n\ntext\n"  # the front matter is not the manuscript's
    assert read.ignored == ["toc"]
    assert [(i.name, i.line) for i in read.images] == [("art/cover.png", 11)]


def test_a_file_without_front_matter_is_all_text_and_has_no_title(tmp_path: Path) -> None:
    text = "# One\n\n---\n\nA break, then more.\n"
    read = manuscripts.read(_write(tmp_path, text))
    assert (read.title, read.metadata, read.text) == (None, {}, text)
    # pandoc's rule: a `---` followed by a blank line opens no front matter (it is a thematic break).
    broken = "---\n\ntitle: no\n---\n"
    assert manuscripts.read(_write(tmp_path, broken)).text == broken


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("title: T\nauthor: {name: A}\n", "book.md:3: author: expected a string or a list of strings"),
        ("title: T\nauthor: [A, 3]\n", "book.md:3: author: expected a string or a list of strings"),
        ("title: [A, B]\n", "book.md:2: title: expected a string"),
        ("title: T\n\ndate: June 2026\n", "book.md:4: date: expected a date as YYYY-MM-DD, e.g. 2026-06-28"),
        ("subject:\n  - A\n  - {x: 1}\n", "book.md:3: subject: expected a string or a list of strings"),
        ("title: T\nlang: \n", "book.md:3: lang: expected a string: it is empty"),
        ("- a list\n", "book.md:2: front matter: expected `key: value` lines"),
        ("title: T\n  bad: indent\n", "book.md:3: front matter: not YAML: mapping values are not allowed"),
        ("cover-image: gone.png\n", "book.md:2: cover-image: gone.png: no such file beside the manuscript"),
        ("cover-image: cover.svg\n", "book.md:2: cover-image: cover.svg: not a PNG, JPEG, GIF or WebP"),
        ("cover-image: ../cover.png\n", "book.md:2: cover-image: ../cover.png: name an image beside the"),
    ],
)
def test_a_mistake_names_the_file_the_line_and_the_field(tmp_path: Path, front: str, expected: str) -> None:
    message = _error(_write(tmp_path, f"---\n{front}---\n# One\n"))
    assert message.startswith(f"{tmp_path}/{expected}"), message


def test_an_unclosed_front_matter_is_named_at_its_first_line(tmp_path: Path) -> None:
    assert _error(_write(tmp_path, "---\ntitle: T\n# One\n")) == (
        f"{tmp_path}/book.md:1: front matter: no closing `---` line: close it, or start the file otherwise"
    )


def test_images_the_text_names_are_found_beside_it_each_once_with_their_lines(tmp_path: Path) -> None:
    text = (
        "---\ntitle: T\n...\n"  # pandoc also closes with `...`
        '# One\n\n![A map,\nover two lines](images/map.png "The map")\n\n'
        "![again](images/map.png) ![far](https://example.org/x.png) ![data](data:image/png;base64,AA)\n\n"
        "```\n![not an image](images/code.png)\n```\n\n`![nor this](images/span.png)`\n\n"
        "![by reference][plan]\n\n[plan]: <images/plan one.png>\n"
    )
    read = manuscripts.read(_write(tmp_path, text, "images/map.png", "images/plan one.png"))
    assert [(i.name, i.line) for i in read.images] == [("images/map.png", 7), ("images/plan one.png", 17)]
    assert read.images[0].content_type == "image/png"


def test_an_image_the_text_names_that_is_not_there_is_named_with_its_line(tmp_path: Path) -> None:
    message = _error(_write(tmp_path, "---\ntitle: T\n---\n# One\n\n![gone](images/gone.png)\n"))
    assert message == (
        f"{tmp_path}/book.md:6: image: images/gone.png: no such file beside the manuscript "
        f"({tmp_path}/images/gone.png)"
    )


def test_a_file_that_is_not_utf8_or_not_there_is_refused_by_name(tmp_path: Path) -> None:
    latin = tmp_path / "latin.md"
    latin.write_bytes("# Küste\n".encode("latin-1"))
    assert _error(latin).startswith(f"{latin}:1: file: not UTF-8 text")
    assert _error(tmp_path / "missing.md") == (
        f"{tmp_path}/missing.md: cannot read it (No such file or directory): name a markdown file"
    )


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("title: T\ndate: 2026-13-45\n", "book.md:3: date: 2026-13-45: no such value (month must"),
        ("title: T\ndate: 2026-02-30\n", "book.md:3: date: 2026-02-30: no such value (day is out of range"),
        ("title: T\ndate: '2026-02-30'\n", "book.md:3: date: 2026-02-30: no such day (YYYY-MM-DD)"),
        ("title: T\n\x07\n", "book.md:3: front matter: not YAML: a control character, U+0007"),
    ],
)
def test_an_impossible_date_or_a_control_character_is_a_file_error_not_a_crash(
    tmp_path: Path, front: str, expected: str
) -> None:
    message = _error(_write(tmp_path, f"---\n{front}---\n# One\n"))
    assert message.startswith(f"{tmp_path}/{expected}"), message


def test_a_byte_order_mark_before_the_front_matter_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "book.md"
    path.write_bytes("\ufeff---\ntitle: T\n---\n# One\n".encode())
    read = manuscripts.read(path)
    assert (read.title, read.text) == ("T", "# One\n")


def test_an_image_is_checked_by_its_bytes_before_anything_is_sent(tmp_path: Path) -> None:
    """The API refuses an image whose bytes are not one (not_an_image) after the book is made: refused
    here first, by the file's first bytes."""
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "bad.png").write_text("not an image\n")
    (tmp_path / "images" / "photo.png").write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 16)
    (tmp_path / "images" / "ok.webp").write_bytes(b"RIFF\0\0\0\0WEBPVP8 " + b"\0" * 16)
    (tmp_path / "images" / "ok.gif").write_bytes(b"GIF89a" + b"\0" * 16)
    path = _write(tmp_path, "---\ntitle: T\n---\n# One\n\n![a](images/ok.webp) ![b](images/ok.gif)\n")
    assert [i.content_type for i in manuscripts.read(path).images] == ["image/webp", "image/gif"]
    assert _error(_write(tmp_path, "# One\n\n![bad](images/bad.png)\n")) == (
        f"{tmp_path}/book.md:3: image: images/bad.png: not a PNG, JPEG, GIF or WebP (by its bytes)"
    )
    assert _error(_write(tmp_path, "---\ncover-image: images/photo.png\n---\n")) == (
        f"{tmp_path}/book.md:2: cover-image: images/photo.png: its bytes are a JPEG's, its name says PNG: "
        "rename it"
    )


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("title: 123\n", "book.md:2: title: expected a string, not int: quote it"),
        ("title: T\nlang: no\n", "book.md:3: lang: expected a string, not bool: quote it"),
        ('title: ""\n', "book.md:2: title: expected a string: it is empty (give one, or leave the key out)"),
        ("title: A\nauthor: B\ntitle: C\n", "book.md:4: title: given twice (first on line 2): keep one"),
    ],
)
def test_a_title_that_is_no_string_is_empty_or_given_twice_is_refused(
    tmp_path: Path, front: str, expected: str
) -> None:
    assert _error(_write(tmp_path, f"---\n{front}---\n# One\n")) == f"{tmp_path}/{expected}"

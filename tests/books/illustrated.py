"""The illustrated test books: a cover, five images of the four accepted types (one of them large), one
image the manuscript names that the book never gets, one image with empty alt text, full metadata with
an ISBN; and a right-to-left book in Arabic. Images are drawn here with Pillow (a test dependency through
pikepdf; the layer's own code imports it only for a WebP in an EPUB), so every byte is known."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

from PIL import Image, ImageDraw


def picture(kind: str, width: int, height: int, *, noise: bool = False, seed: int = 1) -> bytes:
    """An image of `kind` (PNG, JPEG, GIF or WEBP): a labelled gradient, or noise (which no format can
    compress, for a large file)."""
    if noise:
        image = Image.frombytes("RGB", (width, height), random.Random(seed).randbytes(width * height * 3))
    else:
        image = Image.new("RGB", (width, height), (40 + seed * 30 % 200, 90, 140))
        draw = ImageDraw.Draw(image)
        for y in range(0, height, 8):
            draw.line([(0, y), (width, y)], fill=(60 + y * 150 // max(height, 1), 120, 160 + seed % 80))
        draw.rectangle(
            [width // 8, height // 8, width * 7 // 8, height * 7 // 8], outline=(250, 240, 220), width=4
        )
        draw.text((width // 5, height // 2), f"{kind} {width}x{height}", fill=(255, 255, 255))
    out = io.BytesIO()
    image.save(out, format=kind, **({"quality": 85} if kind == "JPEG" else {}))
    return out.getvalue()


@dataclass(frozen=True)
class Illustrated:
    title: str
    manuscript: str
    metadata: dict[str, object]
    assets: dict[str, tuple[str, bytes]]  # name -> (content type, bytes)
    missing: list[str]  # names the manuscript shows that are not among the assets
    empty_alt: list[str]


def lighthouse() -> Illustrated:
    assets = {
        "images/cover.jpg": ("image/jpeg", picture("JPEG", 600, 900, seed=2)),
        "images/coast.png": ("image/png", picture("PNG", 640, 400, seed=3)),
        "images/map.gif": ("image/gif", picture("GIF", 320, 240, seed=4)),
        "images/harbour.webp": ("image/webp", picture("WEBP", 480, 320, seed=5)),
        "images/keeper.jpg": ("image/jpeg", picture("JPEG", 300, 450, seed=6)),
        "images/survey.png": ("image/png", picture("PNG", 1600, 1200, noise=True, seed=7)),
    }
    manuscript = """# The Coast

The lighthouse stands where the coast turns north.

![A rocky coast under a grey sky](images/coast.png)

The keeper's map showed every reef.

![](images/map.gif)

## The Harbour

![Fishing boats in the harbour at dawn](images/harbour.webp "The harbour")

### The Quay

Nets were mended on the quay.

# The Keeper

![The keeper in his oilskins](images/keeper.jpg)

He kept a log of every ship[^log].

![The lost survey of 1888](images/lost-survey.png)

[^log]: The log survives in the county archive.

# The Survey

![A survey of the headland, in fine detail](images/survey.png)

Every rock had a name.
"""
    metadata = {
        "authors": ["Ada Lovelace", "Grace Hopper"],
        "language": "en-GB",
        "identifier": "978-0-306-40615-7",
        "publisher": "Bindery Test Press",
        "description": "A short illustrated history of a lighthouse and its keeper.",
        "subjects": ["Lighthouses", "Maritime history"],
        "published": "2026-06-28",
        "rights": "© 2026 The Authors. All rights reserved.",
    }
    return Illustrated(
        "The Lighthouse", manuscript, metadata, assets, ["images/lost-survey.png"], ["images/map.gif"]
    )


def arabic() -> Illustrated:
    assets = {"images/dunes.png": ("image/png", picture("PNG", 500, 300, seed=8))}
    manuscript = """# الفصل الأول

كان يا ما كان، في قديم الزمان، مدينة على حافة الصحراء.

![كثبان رملية عند الغروب](images/dunes.png)

## السوق

في السوق باعة التوابل والحرير.

# الفصل الثاني

وعاد المسافر إلى بيته بعد سنين طويلة.
"""
    metadata = {"authors": ["ابن بطوطة"], "language": "ar", "identifier": "0-306-40615-2"}
    return Illustrated("رحلة", manuscript, metadata, assets, [], [])

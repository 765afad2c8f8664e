"""Makes the memory runs' illustrated book against the AWS endpoint in the environment, and prints its id:
IMAGES PNGs of about IMAGE_BYTES each, one to a chapter. The images are put in place and published as the
book's assets in one change: adopting 500 one by one through the API would measure the API, not the build.

    python tests/bench/illustrated_probe.py TABLE IMAGES IMAGE_BYTES
"""

import random
import struct
import sys
import zlib
from dataclasses import replace

from bindery import wiring
from bindery.config import Settings
from bindery.images import Asset
from bindery.objects import Objects, asset_key
from bindery.storage import Store

table, images, image_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
settings = Settings(table=table, bucket=table)
store, objects = Store(settings), Objects(settings)
books = wiring.api(settings, store, objects).books


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# Noise, stored uncompressed: a PNG of exactly the size asked for, as no codec could shrink it.
side = int((image_bytes / 3) ** 0.5)
noise = random.Random(1).randbytes(side * side * 3)
rows = b"".join(b"\0" + noise[y * side * 3 : (y + 1) * side * 3] for y in range(side))
header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
png = (
    b"\x89PNG\r\n\x1a\n"
    + _chunk(b"IHDR", header)
    + _chunk(b"IDAT", zlib.compress(rows, 0))
    + _chunk(b"IEND", b"")
)

text = "".join(
    f"# Plate {n}\n\nThe keeper's drawing number {n}.\n\n![Plate {n}](images/{n}.png)\n\n"
    for n in range(1, images + 1)
)
book, _, _ = books.create_book("bench-user", "Plates", text)
assets = []
for n in range(1, images + 1):
    asset = Asset(f"images/{n}.png", f"{n:020x}", "image/png", side, side, len(png))
    objects.put_bytes(asset_key(book.id, asset.object_id), png, "image/png")
    assets.append(asset)
current = store.books.read_book(book.id)
assert current is not None
published = store.books.publish_change(
    current, replace(current, assets=tuple(assets)), staged=None, retired=None, retire_at=0
)
assert published is not None
print(book.id)

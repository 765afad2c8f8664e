"""The one way bytes go up to S3 as they are made: a stream whose memory stays at one part."""

from __future__ import annotations

import base64
import bisect
import contextlib
import hashlib
import io
import tempfile
from typing import Any

from bindery.faults import translate_faults

# boto3's own threshold and part size (TransferConfig): an artifact up to 8 MiB goes up in one PutObject,
# not four calls of a multipart upload (about 60 ms a build at S3's latencies); a larger one in parts of
# 8 MiB, which keeps memory small and still allows artifacts up to 78 GiB.
PART_BYTES = 8 * 1024 * 1024


@translate_faults
class ArtifactWriter(io.RawIOBase):
    """A write-only stream into S3 whose memory stays at one part, whatever the artifact's size.

    An artifact smaller than one part goes up as a single PutObject; a larger one as a multipart upload
    sized to it. Each part is handed to botocore as a seekable buffer, so it is never copied on its way
    out. On any error the multipart upload is aborted, so no half upload is left behind.

    The SHA-256 of everything written is computed on the way (`sha256`), and every PutObject and part
    carries its own SHA-256 as S3's checksum, so S3 refuses bytes that arrived damaged. A single PutObject's
    checksum is the SHA-256 of the whole artifact, and HeadObject answers it; a multipart object's is S3's
    composite (the SHA-256 of its parts' SHA-256s, "-<parts>"): S3 has no whole-object SHA-256 for a
    multipart upload, and the export row's `sha256` is the whole artifact's either way.
    """

    def __init__(
        self,
        client: Any,
        bucket: str,
        key: str,
        content_type: str,
        part_bytes: int | None = None,
        on_disk: bool = False,
    ):
        super().__init__()
        self._client, self._bucket, self.key, self._type = client, bucket, key, content_type
        # A part's bytes: 5 MiB at least, S3's floor. `on_disk`: each part waits in a temporary file, not in
        # memory (for a writer beside another, whose parts would otherwise be held at once).
        self.part_bytes, self._on_disk = part_bytes or PART_BYTES, on_disk
        self._part = self._new_part()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self._whole = hashlib.sha256()
        self.size_bytes = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        written = 0
        while written < len(view):
            room = self.part_bytes - self._part.tell()
            chunk = view[written : written + room]
            self._part.write(chunk)
            self._whole.update(chunk)
            written += len(chunk)
            if self._part.tell() >= self.part_bytes:
                self._send_part()
        self.size_bytes += written
        return written

    def _send_part(self) -> None:
        if self._upload_id is None:
            created = self._client.create_multipart_upload(
                Bucket=self._bucket, Key=self.key, ContentType=self._type, ChecksumAlgorithm="SHA256"
            )
            self._upload_id = created["UploadId"]
        number = len(self._parts) + 1
        checksum = self._checksum(self._part_sha256())
        self._part.seek(0)
        sent = self._client.upload_part(
            Bucket=self._bucket,
            Key=self.key,
            UploadId=self._upload_id,
            PartNumber=number,
            Body=self._part,
            ChecksumSHA256=checksum,
        )
        self._parts.append({"PartNumber": number, "ETag": sent["ETag"], "ChecksumSHA256": checksum})
        self._part.close()
        self._part = self._new_part()

    def _new_part(self) -> Any:
        return tempfile.TemporaryFile() if self._on_disk else Spool()

    def _part_sha256(self) -> bytes:
        """The part's SHA-256, read back from its buffer in one pass when it goes up. (Hashed as it was
        written, beside the whole's, it cost a second pass over every byte of an artifact of one part, whose
        part is the whole: 6 ms of a 0.1 s re-export of the bench's 1,200-chapter html.)"""
        part, digest = self._part, hashlib.sha256()
        part.seek(0)
        while chunk := part.read(1 << 20):
            digest.update(chunk)
        return digest.digest()

    @staticmethod
    def _checksum(digest: bytes) -> str:
        """S3's form of a SHA-256: the digest in base64."""
        return base64.b64encode(digest).decode("ascii")

    def commit(self) -> int:
        """Make the object exist. Returns its size in bytes."""
        if self._upload_id is None:
            checksum = self._checksum(self._whole.digest())  # its one part is the whole
            self._part.seek(0)
            # The algorithm is named beside its value (x-amz-sdk-checksum-algorithm): S3 keeps the value
            # either way, but moto keeps a checksum only when the request names its algorithm, and without
            # it every artifact but the markdown copy was stored with none.
            self._client.put_object(
                Bucket=self._bucket,
                Key=self.key,
                Body=self._part,
                ContentType=self._type,
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=checksum,
            )
        else:
            if self._part.tell():
                self._send_part()
            self._client.complete_multipart_upload(
                Bucket=self._bucket,
                Key=self.key,
                UploadId=self._upload_id,
                MultipartUpload={"Parts": self._parts},
            )
        self._part.close()
        self._part = Spool()
        return self.size_bytes

    @property
    def sha256(self) -> str:
        """The SHA-256, in hex, of every byte written so far."""
        return self._whole.hexdigest()

    def abort(self) -> None:
        """Leave no half upload behind. Best effort: the bucket's lifecycle rule is the backstop."""
        self._part.close()
        self._part = Spool()
        if self._upload_id is not None:
            upload_id, self._upload_id = self._upload_id, None
            with contextlib.suppress(Exception):
                self._client.abort_multipart_upload(Bucket=self._bucket, Key=self.key, UploadId=upload_id)


class Spool(io.RawIOBase):
    """A part held in memory as the chunks it was written in, read back in order: a bytes chunk is kept as
    it is, never copied. (A BytesIO grows by an eighth at a time, copying what it holds at each step: an
    html artifact of 1,200 chapters, written a chapter at a time, spent 4-20 ms of a 0.1 s re-export
    there.) It is written only at its end, and read (by botocore, as a request's body) after a seek."""

    def __init__(self) -> None:
        super().__init__()
        self._chunks: list[bytes] = []
        self._ends: list[int] = []  # where each chunk ends
        self._size = self._at = 0

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self._at != self._size:
            raise io.UnsupportedOperation("a spool is written only at its end")
        chunk = data if type(data) is bytes else bytes(data)
        if chunk:
            self._chunks.append(chunk)
            self._size += len(chunk)
            self._ends.append(self._size)
            self._at = self._size
        return len(chunk)

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = min(max(base + offset, 0), self._size)
        return self._at

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._at + size)
        out: list[bytes] = []
        n = bisect.bisect_right(self._ends, self._at)
        while self._at < end:
            chunk, start = self._chunks[n], self._ends[n] - len(self._chunks[n])
            taken = chunk[self._at - start : end - start]
            out.append(taken)
            self._at += len(taken)
            n += 1
        return out[0] if len(out) == 1 else b"".join(out)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._chunks, self._ends = [], []
        super().close()

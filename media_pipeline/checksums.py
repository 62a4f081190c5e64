"""Streaming SHA-256 of files and readers; nothing is ever read whole into memory.

Protocol: Run rules step ``store_original_and_checksum`` and issue 4 ("the SHA-256 of the
original is taken as it arrives and checked again after every step").
"""

from __future__ import annotations

import hashlib
import io
import os
from typing import BinaryIO

CHUNK_BYTES = 1024 * 1024


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a local file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


class HashingReader(io.RawIOBase):
    """A read-only, forward-only stream that hashes and counts the bytes it hands out.

    Storage backends read from it in chunks (FileSystemStorage through ``chunks()``,
    django-storages' S3 backend through ``upload_fileobj``), so the digest is taken exactly
    over what was stored, in one pass. It refuses to seek anywhere but where it is, so no
    backend can re-read part of it and make the digest differ from the stored bytes.
    """

    def __init__(self, source: BinaryIO) -> None:
        super().__init__()
        self._source = source
        self._digest = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        data = self._source.read(len(buffer))
        if not data:
            return 0
        count = len(data)
        buffer[:count] = data
        self._digest.update(data)
        self.size += count
        return count

    def tell(self) -> int:
        return self.size

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if (whence == io.SEEK_SET and offset == self.size) or (
            whence == io.SEEK_CUR and offset == 0
        ):
            return self.size
        raise io.UnsupportedOperation("HashingReader only reads forward")

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

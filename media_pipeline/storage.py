"""Moving media between Django's storage and local paths for ffmpeg, streaming, atomically.

Issue 4, "Workers and storage": files move through Django's storage API (the filesystem by
default, S3 through django-storages when ``AWS_STORAGE_BUCKET_NAME`` is set); large files
are streamed in chunks, never read whole; outputs are written under a temporary local name
and published in one step, so a killed worker leaves nothing half-written in storage:

- filesystem storage: the finished local file is renamed into place (``os.replace`` is
  atomic on one filesystem); when the work directory is on another filesystem the copy goes
  to a hidden staging directory beside the media first and is renamed from there;
- S3: one PUT or a multipart upload, which S3 makes visible only when it completes.

Stored names are opaque (``media/<32 random hex>``): nothing in a name says which system,
run or round a file belongs to.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, default_storage

from media_pipeline.checksums import CHUNK_BYTES, HashingReader

NAME_PREFIX = "media"
STAGING_DIRECTORY = ".staging"


class StoredFileChanged(RuntimeError):
    """A stored file's bytes no longer match the SHA-256 recorded when it arrived."""


def opaque_name(suffix: str = "") -> str:
    """A fresh random storage name, e.g. ``media/3f2a...c9.mp4``."""
    return f"{NAME_PREFIX}/{secrets.token_hex(16)}{suffix}"


SCRATCH_DIRECTORY = "scratch"


def work_dir() -> Path:
    """The local scratch directory for ffmpeg inputs and outputs: ``DUEL_WORK_DIR/scratch``.

    Everything in it is transient and removed by the code that made it; what a killed worker
    left behind is removed by :func:`scratch_sweep`. Long-lived local state (the reference
    providers' job records) lives beside it in ``DUEL_WORK_DIR``, never in it.
    """
    path = Path(settings.DUEL_WORK_DIR) / SCRATCH_DIRECTORY
    path.mkdir(parents=True, exist_ok=True)
    return path


def _last_touched(path: Path) -> float:
    """The newest modification time of ``path`` and, for a directory, of anything in it."""
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                try:
                    newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
                except FileNotFoundError:  # removed while we looked: its owner is alive
                    continue
    return newest


def scratch_sweep(*, max_age_s: float, now: float | None = None) -> list[str]:
    """Remove scratch entries untouched for ``max_age_s``; return their names.

    A worker writes to its scratch while it works (ffmpeg's output grows, spooled inputs
    arrive), and no task runs longer than the task time limit, so an entry untouched for
    longer than that belongs to a worker that was killed. Live work is never older.
    """
    import time

    now = time.time() if now is None else now
    removed = []
    for entry in sorted(work_dir().iterdir()):
        try:
            if now - _last_touched(entry) <= max_age_s:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except FileNotFoundError:
            continue
        removed.append(entry.name)
    return removed


def _storage() -> Storage:
    return default_storage


def local_path_of(name: str, storage: Storage | None = None) -> Path | None:
    """The file's own path when the storage is the local filesystem, else ``None``."""
    storage = storage or _storage()
    if isinstance(storage, FileSystemStorage):
        return Path(storage.path(name))
    return None


def spool_to_work_dir(source: BinaryIO) -> tuple[Path, str, int]:
    """Copy a stream into a new file in the work directory, hashing on the way.

    Returns (path, sha256, size). The caller owns (publishes or deletes) the file.
    """
    reader = HashingReader(source)
    handle = tempfile.NamedTemporaryFile(dir=work_dir(), prefix="in-", delete=False)  # noqa: SIM115
    try:
        with handle:
            shutil.copyfileobj(reader, handle, CHUNK_BYTES)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return Path(handle.name), reader.sha256, reader.size


def publish(local_path: Path, *, suffix: str = "", storage: Storage | None = None) -> str:
    """Make a finished local file visible in storage under a new opaque name, atomically.

    The local file is consumed (moved or uploaded, then removed).
    """
    storage = storage or _storage()
    name = opaque_name(suffix)
    target = local_path_of(name, storage)
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Scratch files are private (0600); stored media get the storage's usual mode.
        os.chmod(local_path, storage.file_permissions_mode or 0o644)  # type: ignore[attr-defined]
        try:
            os.replace(local_path, target)
        except OSError:
            # Another filesystem: copy next to the media, then rename there.
            assert isinstance(storage, FileSystemStorage)
            staging = Path(storage.location) / STAGING_DIRECTORY
            staging.mkdir(parents=True, exist_ok=True)
            staged = staging / secrets.token_hex(16)
            try:
                shutil.copyfile(local_path, staged)
                os.replace(staged, target)
            finally:
                staged.unlink(missing_ok=True)
            local_path.unlink(missing_ok=True)
        return name
    try:
        with open(local_path, "rb") as handle:
            stored = storage.save(name, File(handle, name=name))
    finally:
        local_path.unlink(missing_ok=True)
    if stored != name:  # a backend that renames would break the opaque-name contract
        storage.delete(stored)
        raise RuntimeError(f"storage renamed {name} to {stored}")
    return name


def delete_quietly(name: str, storage: Storage | None = None) -> None:
    """Remove a published file that no row will reference (lost race, failed insert)."""
    (storage or _storage()).delete(name)


@contextmanager
def local_copy(
    name: str, *, expected_sha256: str, storage: Storage | None = None
) -> Iterator[Path]:
    """A local path ffmpeg can read for the stored file ``name``.

    Filesystem storage yields the stored file itself (ffmpeg only reads it; callers hash it
    before and after their step). Other storages are streamed in chunks into the work
    directory, hashing on the way; a digest other than ``expected_sha256`` raises
    :class:`StoredFileChanged`. The copy is deleted afterwards.
    """
    storage = storage or _storage()
    own = local_path_of(name, storage)
    if own is not None:
        yield own
        return
    with storage.open(name, "rb") as source:
        path, digest, _size = spool_to_work_dir(source)
    try:
        if digest != expected_sha256:
            raise StoredFileChanged(f"{name}: SHA-256 {digest} differs from {expected_sha256}")
        yield path
    finally:
        path.unlink(missing_ok=True)

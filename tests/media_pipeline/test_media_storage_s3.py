"""Media through S3 (django-storages) against a local S3-compatible server (moto_server)."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from media_pipeline.services import original_store, proxy_build
from media_pipeline.storage import StoredFileChanged, local_copy

pytestmark = pytest.mark.django_db
BUCKET = "duel-media-test"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint():
    binary = Path(sys.executable).parent / "moto_server"
    port = _free_port()
    proc = subprocess.Popen(
        [str(binary), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("moto_server did not start")
            time.sleep(0.1)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **CREDENTIALS)
    client.create_bucket(Bucket=BUCKET)
    yield endpoint, client
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)


@pytest.fixture
def s3_storage(settings, s3_endpoint):
    endpoint, client = s3_endpoint
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": endpoint,
                "access_key": CREDENTIALS["aws_access_key_id"],
                "secret_key": CREDENTIALS["aws_secret_access_key"],
                "region_name": "us-east-1",
                "file_overwrite": False,
                "default_acl": None,
            },
        },
    }
    return client


class Generated:
    """A 9 MiB stream produced on the fly (larger than the multipart threshold)."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.digest = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        chunk = (b"duel-media-" * (n // 11 + 1))[:n]
        self.left -= n
        self.digest.update(chunk)
        return chunk


def test_stream_in_and_out_of_s3(s3_storage, settings):
    source = Generated(9 * 1024 * 1024)
    stored = original_store(fileobj=source)
    assert stored.sha256 == source.digest.hexdigest()
    head = s3_storage.head_object(Bucket=BUCKET, Key=stored.storage_name)
    assert head["ContentLength"] == stored.size_bytes
    with local_copy(stored.storage_name, expected_sha256=stored.sha256) as path:
        assert Path(path).is_relative_to(Path(settings.DUEL_WORK_DIR))
        assert path.stat().st_size == stored.size_bytes
    assert not path.exists()  # the local copy is gone after the step
    s3_storage.put_object(Bucket=BUCKET, Key=stored.storage_name, Body=b"replaced")
    with pytest.raises(StoredFileChanged):
        with local_copy(stored.storage_name, expected_sha256=stored.sha256):
            pass


def test_proxy_of_an_s3_original_is_stored_in_s3(s3_storage, media):
    stored = original_store(path=media.get("landscape.mp4"))
    proxy = proxy_build(media_file=stored, protocol_key="ai-duel-0.1", canvas=(640, 360))
    assert proxy.verification["ok"] is True
    body = s3_storage.get_object(Bucket=BUCKET, Key=proxy.proxy_file.storage_name)["Body"].read()
    assert hashlib.sha256(body).hexdigest() == proxy.proxy_file.sha256

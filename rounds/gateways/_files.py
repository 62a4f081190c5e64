"""Small file and ffmpeg helpers shared by the adapters (private to rounds.gateways).

Outputs are written under a temporary name beside the destination and published with
``os.replace``, so a worker killed mid-write never leaves a half-written asset under the final
name (STYLE: Transactions and tasks).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

FFMPEG = "ffmpeg"
FFPROBE = "ffprobe"


class ToolFailed(RuntimeError):
    """ffmpeg or ffprobe exited non-zero; ``stderr_tail`` holds its last lines."""

    def __init__(self, message: str, stderr_tail: str) -> None:
        super().__init__(f"{message}: {stderr_tail}")
        self.stderr_tail = stderr_tail


@contextlib.contextmanager
def publishing(dest_path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``dest_path``; rename it into place if the block succeeds."""
    dest_path = Path(dest_path)
    dest_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest_path.with_name(f".{dest_path.name}.{uuid.uuid4().hex}.part")
    try:
        yield tmp
        os.replace(tmp, dest_path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def run_tool(
    args: Sequence[str],
    *,
    timeout_s: float | None = None,
    stdin_chunks: Iterable[bytes] | None = None,
) -> None:
    """Run ffmpeg/ffprobe quietly; raise :class:`ToolFailed` with the error tail on failure.

    ``stdin_chunks`` are streamed to the tool's standard input (raw audio for ``pipe:0``);
    stderr goes to a temporary file so no pipe can fill up and stall the tool.
    """
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            list(args),
            stdin=subprocess.PIPE if stdin_chunks is not None else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            if stdin_chunks is not None:
                assert proc.stdin is not None
                with contextlib.suppress(BrokenPipeError):
                    # A broken pipe means the tool died; its exit code and stderr say why.
                    with proc.stdin:
                        for chunk in stdin_chunks:
                            proc.stdin.write(chunk)
            returncode = proc.wait(timeout=timeout_s)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if returncode != 0:
            errors.seek(0)
            tail = errors.read().decode("utf-8", "replace").strip().splitlines()[-6:]
            raise ToolFailed(f"{args[0]} exited {returncode}", "\n".join(tail))


def probe(path: Path, *, timeout_s: float = 60) -> dict[str, Any]:
    """ffprobe's JSON for the format and streams of ``path``; ToolFailed if it cannot read it."""
    proc = subprocess.run(
        [
            FFPROBE,
            "-v",
            "error",
            "-print_format",
            "json",
            "-show_format",
            "-show_streams",
            str(path),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise ToolFailed("ffprobe failed", proc.stderr.decode("utf-8", "replace").strip())
    return json.loads(proc.stdout)


def probed_seconds(info: dict[str, Any]) -> float:
    """The container duration from :func:`probe` output (0.0 when absent)."""
    return float(info.get("format", {}).get("duration") or 0.0)

"""Typed ffmpeg / ffprobe argument lists and a bounded subprocess runner.

Why our own builder rather than ffmpeg-python: ffmpeg-python has been unmaintained since 2019,
and all it does is turn a Python graph into an argument list. We need less than that (a handful
of fixed command shapes) and more than that: every call must carry a time limit and resource
bounds, read several pipes at once (raw frames on stdout, filter logs on stderr, ``-progress``
on a third descriptor) without deadlocking, and escape filter option values exactly, because a
watermark text or a path reaching the filter graph unescaped would change the graph. A few
small frozen dataclasses do that, are easy to read in a review, and are testable without
running ffmpeg. Nothing here ever builds a shell string: the program receives an argv list.

Resource bounds (issue 4, "Workers and storage"): each :class:`ToolCommand` carries a
wall-clock ``timeout_s`` (the process group is SIGKILLed when it passes) and
:class:`ResourceLimits` applied with ``setrlimit`` in the child before ``exec``: CPU seconds,
address space, the size of any file it writes, and open files. ffmpeg's own ``-max_alloc``
caps any single allocation, so an absurd frame size in a hostile header fails fast.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# prctl(2) through libc (Linux); elsewhere children are only killed on timeout.
_PR_SET_PDEATHSIG = 1
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
except OSError:  # pragma: no cover - not Linux
    _LIBC = None

GiB = 1024**3
MiB = 1024**2

# A single allocation larger than this is never needed for frames up to the analysis bound
# (``max_pixels``): a 16-megapixel 16-bit 4:4:4 frame plane is well under it.
MAX_SINGLE_ALLOCATION_BYTES = 512 * MiB


class ToolNotFound(RuntimeError):
    """ffmpeg or ffprobe is not installed where the settings say."""


@dataclass(frozen=True)
class ResourceLimits:
    """Kernel limits applied to a child process before it starts (``setrlimit``)."""

    cpu_s: int | None = None
    address_space_bytes: int | None = 6 * GiB
    file_size_bytes: int | None = None
    open_files: int | None = 256

    def apply(self) -> None:
        """Set the limits in the current process; runs in the child between fork and exec.

        Also asks the kernel to SIGKILL the child when the worker that started it dies
        (``PR_SET_PDEATHSIG``), so a killed worker never leaves an orphan ffmpeg running.
        Only ``prctl`` and ``setrlimit`` are called, which is safe in a freshly forked child.
        """
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        pairs = (
            (resource.RLIMIT_CPU, self.cpu_s),
            (resource.RLIMIT_AS, self.address_space_bytes),
            (resource.RLIMIT_FSIZE, self.file_size_bytes),
            (resource.RLIMIT_NOFILE, self.open_files),
        )
        for which, value in pairs:
            if value is not None:
                resource.setrlimit(which, (int(value), int(value)))


@dataclass(frozen=True)
class ToolCommand:
    """One program invocation: argv, its wall-clock limit and its kernel limits."""

    argv: tuple[str, ...]
    timeout_s: float
    limits: ResourceLimits = field(default_factory=ResourceLimits)

    @property
    def reports_progress(self) -> bool:
        return PROGRESS_TARGET in self.argv

    def __post_init__(self) -> None:
        if not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise TypeError("argv must be a non-empty tuple of str")
        if self.timeout_s <= 0:
            raise ValueError("every tool call needs a positive time limit")


# ---------------------------------------------------------------------------------------------
# Filter graphs


def escape_filter_value(value: str) -> str:
    """Escape ``value`` for use as one option value inside a ``-filter_complex`` graph.

    ffmpeg unescapes twice: once when it splits the graph into filters (``[],;`` are special),
    and once when the filter splits its own ``key=value:key=value`` list (``:`` is special).
    Both levels treat ``\\`` and ``'`` as escape characters, so we escape for the option level
    first and then escape the result for the graph level.
    """
    option_level = "".join("\\" + c if c in "\\':" else c for c in value)
    return "".join("\\" + c if c in "\\'[],;" else c for c in option_level)


@dataclass(frozen=True)
class Filter:
    """One filter with ordered options: ``Filter("scale", w="320", h="-2")``."""

    name: str
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, **options: str | int | float) -> Filter:
        return cls(name, tuple((k, _option_text(v)) for k, v in options.items()))

    def render(self) -> str:
        if not self.options:
            return self.name
        body = ":".join(f"{k}={escape_filter_value(v)}" for k, v in self.options)
        return f"{self.name}={body}"


def _option_text(value: str | int | float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value) if value != int(value) else str(int(value))
    return str(value)


@dataclass(frozen=True)
class FilterChain:
    """``[in]f1,f2,...[out]...``: a linear chain with labelled inputs and outputs."""

    inputs: tuple[str, ...]
    filters: tuple[Filter, ...]
    outputs: tuple[str, ...]

    def render(self) -> str:
        ins = "".join(f"[{label}]" for label in self.inputs)
        outs = "".join(f"[{label}]" for label in self.outputs)
        return ins + ",".join(f.render() for f in self.filters) + outs


def filter_graph(chains: Iterable[FilterChain]) -> str:
    """Join chains into one ``-filter_complex`` argument."""
    return ";".join(chain.render() for chain in chains)


# ---------------------------------------------------------------------------------------------
# Command shapes

Option = tuple[str, ...]

# Stands for the ``-progress`` target in an argv; :func:`run_tool` replaces it with
# ``pipe:N`` for a pipe it opens, because only then is the descriptor number known.
PROGRESS_TARGET = "<progress-pipe>"


@dataclass(frozen=True)
class FfmpegInput:
    path: str
    options: tuple[Option, ...] = ()


@dataclass(frozen=True)
class FfmpegOutput:
    """One output: its ``-map`` labels, options (codecs, flags) and target (path or pipe)."""

    target: str
    maps: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()


def ffmpeg_command(
    *,
    binary: str,
    inputs: Sequence[FfmpegInput],
    outputs: Sequence[FfmpegOutput],
    timeout_s: float,
    limits: ResourceLimits,
    graph: str | None = None,
    exit_on_error: bool = False,
    progress: bool = False,
    overwrite: bool = False,
) -> ToolCommand:
    """Build an ffmpeg invocation; never a shell string.

    Logging uses ``-loglevel repeat+level+info`` so each stderr line carries its level
    (``[error]``, ``[info]``...) and no line is folded into "last message repeated".
    """
    argv: list[str] = [
        binary,
        "-hide_banner",
        "-nostdin",
        "-nostats",
        "-loglevel",
        "repeat+level+info",
        "-max_alloc",
        str(MAX_SINGLE_ALLOCATION_BYTES),
        "-y" if overwrite else "-n",
    ]
    if exit_on_error:
        argv.append("-xerror")
    if progress:
        argv += ["-progress", PROGRESS_TARGET]
    for item in inputs:
        for opt in item.options:
            argv += list(opt)
        argv += ["-i", item.path]
    if graph is not None:
        argv += ["-filter_complex", graph]
    for out in outputs:
        for label in out.maps:
            argv += ["-map", label]
        for opt in out.options:
            argv += list(opt)
        argv.append(out.target)
    return ToolCommand(tuple(argv), timeout_s=timeout_s, limits=limits)


def ffprobe_command(
    *,
    binary: str,
    path: str,
    timeout_s: float,
    limits: ResourceLimits,
    extra: Sequence[str] = (),
    show: Sequence[str] = ("-show_format", "-show_streams"),
) -> ToolCommand:
    """``ffprobe -print_format json`` with our bounds."""
    argv = [
        binary,
        "-hide_banner",
        "-loglevel",
        "error",
        "-max_alloc",
        str(MAX_SINGLE_ALLOCATION_BYTES),
        "-print_format",
        "json",
        *show,
        *extra,
        path,
    ]
    return ToolCommand(tuple(argv), timeout_s=timeout_s, limits=limits)


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class ToolResult:
    """What a finished (or killed) tool call left behind."""

    returncode: int
    timed_out: bool
    elapsed_s: float
    stderr_kept: list[str]
    stderr_tail: list[str]
    stdout: bytes = b""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


ProgressCallback = Callable[[dict[str, str]], None]


def run_tool(
    command: ToolCommand,
    *,
    stdout_sink: Callable[[bytes], None] | None = None,
    keep_stderr: Callable[[str], bool] | None = None,
    on_progress: ProgressCallback | None = None,
    max_captured_stdout: int = 64 * MiB,
    max_kept_stderr_lines: int = 200_000,
) -> ToolResult:
    """Run ``command``, streaming its pipes, and return when it exits or is killed.

    - ``stdout_sink`` receives stdout chunks as they arrive (raw frames); without a sink stdout
      is captured up to ``max_captured_stdout`` bytes (ffprobe JSON) and the call fails beyond.
    - stderr lines for which ``keep_stderr`` is true are kept (detector reports); the last 200
      lines are always kept for error messages. Memory stays bounded whatever the tool prints.
    - ``-progress`` blocks (``key=value`` lines ending with ``progress=...``) go to
      ``on_progress`` as dicts.
    The process runs in its own session so a timeout kills ffmpeg and anything it spawned.
    """
    progress_read: int | None = None
    progress_write: int | None = None
    argv = list(command.argv)
    if command.reports_progress:
        progress_read, progress_write = os.pipe()
        argv = [f"pipe:{progress_write}" if a == PROGRESS_TARGET else a for a in argv]
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=() if progress_write is None else (progress_write,),
            start_new_session=True,
            preexec_fn=command.limits.apply,
        )
    except FileNotFoundError as exc:
        if progress_read is not None:
            os.close(progress_read)
        raise ToolNotFound(f"{command.argv[0]} is not installed or not on PATH") from exc
    finally:
        if progress_write is not None:
            os.close(progress_write)

    selector = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    progress_file = None
    if progress_read is not None:
        progress_file = os.fdopen(progress_read, "rb", buffering=0)
        selector.register(progress_file, selectors.EVENT_READ, "progress")

    kept: list[str] = []
    tail: deque[str] = deque(maxlen=200)
    captured = bytearray()
    partial = {"stderr": b"", "progress": b""}
    progress_block: dict[str, str] = {}
    deadline = started + command.timeout_s
    timed_out = False
    overflow = False

    def _lines(name: str, chunk: bytes) -> list[str]:
        data = partial[name] + chunk
        *complete, rest = data.split(b"\n")
        partial[name] = rest
        return [line.decode("utf-8", "replace").rstrip("\r") for line in complete]

    def _stderr_line(line: str) -> None:
        tail.append(line)
        if keep_stderr is not None and len(kept) < max_kept_stderr_lines and keep_stderr(line):
            kept.append(line)

    def _progress_line(line: str) -> None:
        key, _, value = line.partition("=")
        progress_block[key.strip()] = value.strip()
        if key.strip() == "progress" and on_progress is not None:
            on_progress(dict(progress_block))

    try:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(timeout=min(remaining, 1.0)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                if key.data == "stdout":
                    if stdout_sink is not None:
                        stdout_sink(chunk)
                    elif len(captured) + len(chunk) > max_captured_stdout:
                        overflow = True
                        break
                    else:
                        captured += chunk
                elif key.data == "stderr":
                    for line in _lines("stderr", chunk):
                        _stderr_line(line)
                else:
                    for line in _lines("progress", chunk):
                        _progress_line(line)
            if overflow:
                break
        if timed_out or overflow:
            _kill_group(proc)
        try:
            returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            returncode = proc.wait()
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    finally:
        selector.close()
        for stream in (proc.stdout, proc.stderr, progress_file):
            if stream is not None:
                stream.close()
    if partial["stderr"]:
        _stderr_line(partial["stderr"].decode("utf-8", "replace"))
    if overflow:
        tail.append("[fatal] output larger than the bound allowed for this call")
        returncode = returncode or -1
    return ToolResult(
        returncode=returncode,
        timed_out=timed_out,
        elapsed_s=time.monotonic() - started,
        stderr_kept=kept,
        stderr_tail=list(tail),
        stdout=bytes(captured),
    )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def error_lines(result: ToolResult, *, ignore_prefixes: tuple[str, ...] = ()) -> list[str]:
    """The ``[error]`` / ``[fatal]`` / ``[panic]`` lines among the kept and tail lines."""
    seen: list[str] = []
    for line in [*result.stderr_kept, *result.stderr_tail]:
        if ignore_prefixes and line.startswith(ignore_prefixes):
            continue
        if any(tag in line for tag in ("[error]", "[fatal]", "[panic]")) and line not in seen:
            seen.append(line)
    return seen


def tool_version(binary: str, *, timeout_s: float = 20.0) -> str:
    """The first line of ``<binary> -version`` (recorded with every round's frozen controls)."""
    result = run_tool(ToolCommand((binary, "-version"), timeout_s=timeout_s))
    if not result.ok:
        raise ToolNotFound(f"{binary} -version failed: {' '.join(result.stderr_tail[-3:])}")
    first = result.stdout.decode("utf-8", "replace").splitlines()
    return first[0].strip() if first else ""


def path_arg(path: str | os.PathLike[str]) -> str:
    """An input/output path as ffmpeg must see it.

    ffmpeg treats ``name:rest`` as a protocol URL and ``-`` as stdin; prefixing ``file:``
    makes every local path a plain file, whatever its name.
    """
    return "file:" + str(Path(path))

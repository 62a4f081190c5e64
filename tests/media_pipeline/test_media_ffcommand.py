"""The argument builder and the bounded runner (no shell, escaping, time and resource limits)."""

from __future__ import annotations

import sys

import pytest

from media_pipeline.ffcommand import (
    PROGRESS_TARGET,
    FfmpegInput,
    FfmpegOutput,
    Filter,
    FilterChain,
    ResourceLimits,
    ToolCommand,
    ToolNotFound,
    escape_filter_value,
    ffmpeg_command,
    filter_graph,
    path_arg,
    run_tool,
    tool_version,
)

HOSTILE_TEXT = "AI DUEL | it's a:b, [c]; d\\e %{pts}"


def test_filter_value_survives_both_unescaping_levels_in_real_ffmpeg():
    """ffmpeg must see exactly our text: add it as frame metadata and print it back."""
    graph = filter_graph(
        [
            FilterChain(
                ("0:v",),
                (
                    Filter.of("metadata", mode="add", key="duel_text", value=HOSTILE_TEXT),
                    Filter.of("metadata", mode="print", key="duel_text"),
                ),
                ("out",),
            )
        ]
    )
    command = ffmpeg_command(
        binary="ffmpeg",
        inputs=[FfmpegInput("testsrc2=s=64x36:d=0.1", options=(("-f", "lavfi"),))],
        outputs=[FfmpegOutput("-", maps=("[out]",), options=(("-f", "null"),))],
        graph=graph,
        timeout_s=30,
        limits=ResourceLimits(),
    )
    result = run_tool(command, keep_stderr=lambda line: "duel_text=" in line)
    assert result.ok, result.stderr_tail
    assert result.stderr_kept
    assert all(line.endswith(f"duel_text={HOSTILE_TEXT}") for line in result.stderr_kept)


def test_escape_filter_value_escapes_every_separator():
    escaped = escape_filter_value("a:b,c;[d]'e\\")
    for raw in (":", ",", ";", "[", "]", "'"):
        assert f"{raw}" not in escaped.replace(f"\\{raw}", "")


def test_commands_are_argument_lists_with_bounds_and_no_shell():
    command = ffmpeg_command(
        binary="ffmpeg",
        inputs=[FfmpegInput(path_arg("/tmp/a file; rm -rf x.mp4"))],
        outputs=[FfmpegOutput(path_arg("/tmp/out.mp4"))],
        timeout_s=10,
        limits=ResourceLimits(cpu_s=5),
        exit_on_error=True,
        progress=True,
    )
    assert isinstance(command.argv, tuple)
    assert "file:/tmp/a file; rm -rf x.mp4" in command.argv
    assert "-xerror" in command.argv and "-nostdin" in command.argv
    assert "-max_alloc" in command.argv
    assert command.reports_progress and PROGRESS_TARGET in command.argv
    with pytest.raises(ValueError):
        ToolCommand(("ffmpeg",), timeout_s=0)


def test_runner_kills_a_call_that_outlives_its_time_limit():
    command = ToolCommand((sys.executable, "-c", "import time; time.sleep(30)"), timeout_s=0.5)
    result = run_tool(command)
    assert result.timed_out and not result.ok
    assert result.elapsed_s < 10


def test_runner_applies_resource_limits_in_the_child():
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_CPU)[0])"
    result = run_tool(
        ToolCommand((sys.executable, "-c", code), timeout_s=20, limits=ResourceLimits(cpu_s=7))
    )
    assert result.ok
    assert result.stdout.strip() == b"7"


def test_runner_bounds_captured_output():
    code = "import sys; sys.stdout.write('x' * 5_000_000)"
    result = run_tool(
        ToolCommand((sys.executable, "-c", code), timeout_s=20), max_captured_stdout=1000
    )
    assert not result.ok


def test_progress_blocks_reach_the_callback():
    blocks: list[dict[str, str]] = []
    command = ffmpeg_command(
        binary="ffmpeg",
        inputs=[FfmpegInput("testsrc2=s=64x36:d=1", options=(("-f", "lavfi"),))],
        outputs=[FfmpegOutput("-", options=(("-f", "null"),))],
        timeout_s=30,
        limits=ResourceLimits(),
        progress=True,
    )
    assert run_tool(command, on_progress=blocks.append).ok
    assert blocks[-1]["progress"] == "end"
    assert int(blocks[-1]["out_time_us"]) > 900_000


def test_missing_binary_is_a_clear_error():
    with pytest.raises(ToolNotFound):
        tool_version("/nonexistent/ffmpeg")
    assert tool_version("ffmpeg").startswith("ffmpeg version")

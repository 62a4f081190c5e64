"""Media pipeline benchmarks (issue 4, "Benchmarks"). Prints figures; asserts nothing.

1. Analysis (probe + one decode pass with every detector + filler/credits arithmetic) on a
   60 s 1080p30 clip with audio, as a multiple of real time and as the ratio of a bare
   ``ffmpeg -i X -f null -`` decode time to the analysis time, measured in the same run
   (goal: at least 0.8).
2. Proxy build (probe + encode + verification + SHA-256) divided by the time of the bare
   ffmpeg command doing the same transcode (goal: at most 1.10).
3. Peak memory of a worker process (its own peak RSS, VmHWM, plus the largest ffmpeg child's
   peak RSS from ``getrusage(RUSAGE_CHILDREN)``) analysing, and building the proxy of, a 60 s
   and a 20 min film at the same small resolution (640x360, 30 fps: stated, to keep the
   benchmark minutes long rather than hours), plus the 60 s 1080p clip (goal: no growth
   with length).

Usage: ``.venv/bin/python benchmarks/bench_media.py [--long-minutes 20] [--cache DIR]``.
Clips are generated once into the cache directory (default: /tmp/duel-bench-media).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from media_pipeline.analysis import analyse_media  # noqa: E402
from media_pipeline.probe import probe_file  # noqa: E402
from media_pipeline.proxy import (  # noqa: E402
    ProxyRecipe,
    encode_proxy,
    proxy_command,
    verify_proxy,
)
from media_pipeline.validation import MediaRequirements  # noqa: E402
from rounds.protocols import Protocol  # noqa: E402


def make_clip(path: Path, *, seconds: int, size: str, fps: int) -> Path:
    if path.exists():
        return path
    tmp = path.with_suffix(".part.mp4")
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
         "-f", "lavfi", "-i", f"testsrc2=s={size}:r={fps}:d={seconds}",
         "-f", "lavfi", "-i", f"sine=f=440:d={seconds}:sample_rate=48000",
         "-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p",
         "-c:a", "aac", "-ac", "2", str(tmp)],
        check=True,
    )  # fmt: skip
    tmp.rename(path)
    return path


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def cpu_timed(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process and its children, result).

    CPU time does not depend on what else the machine is doing, so the ratios are also
    given in CPU time: on a shared machine wall-clock ratios swing with the load.
    """
    before_self = resource.getrusage(resource.RUSAGE_SELF)
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, result = timed(fn)
    after_self = resource.getrusage(resource.RUSAGE_SELF)
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(
        getattr(after, field) - getattr(before, field)
        for after, before in ((after_self, before_self), (after_children, before_children))
        for field in ("ru_utime", "ru_stime")
    )
    return wall, cpu, result


def bare_decode(path: Path) -> tuple[float, float]:
    wall, cpu, _ = cpu_timed(
        lambda: subprocess.run(
            [
                "ffmpeg",
                "-hide_banner",
                "-nostdin",
                "-loglevel",
                "error",
                "-i",
                str(path),
                "-f",
                "null",
                "-",
            ],
            check=True,
        )  # fmt: skip
    )
    return wall, cpu


def requirements_for(seconds: float) -> MediaRequirements:
    return MediaRequirements(
        target_s=seconds,
        tolerance_s=min(0.05 * seconds, 60.0),
        aspect_ratio="16:9",
        not_counted=tuple(
            Protocol.load("ai-duel-0.1").section("not_counted_in_effective_duration")
        ),
    )


def bench_analysis(path: Path, seconds: float, rounds: int) -> dict:
    bare, ours = [], []
    for _ in range(rounds):
        bare.append(bare_decode(path))
        wall, cpu, report = cpu_timed(
            lambda: analyse_media(path, requirements=requirements_for(seconds))
        )
        assert report.analysed, report.problems
        ours.append((wall, cpu))
    bare_wall, bare_cpu = min(w for w, _ in bare), min(c for _, c in bare)
    ours_wall, ours_cpu = min(w for w, _ in ours), min(c for _, c in ours)
    return {
        "bare_decode_wall_s": round(bare_wall, 2),
        "analysis_wall_s": round(ours_wall, 2),
        "analysis_x_realtime": round(seconds / ours_wall, 2),
        "ratio_bare_over_analysis_wall": round(bare_wall / ours_wall, 3),
        "bare_decode_cpu_s": round(bare_cpu, 2),
        "analysis_cpu_s": round(ours_cpu, 2),
        "ratio_bare_over_analysis_cpu": round(bare_cpu / ours_cpu, 3),
    }


def bench_proxy(path: Path, recipe: ProxyRecipe, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        ours_path = Path(scratch) / "ours.mp4"
        bare_path = Path(scratch) / "bare.mp4"

        def ours():
            probe = encode_proxy(path, ours_path, recipe=recipe)
            verification = verify_proxy(probe, ours_path, recipe=recipe)
            assert verification.ok, verification.checks
            return verification

        probe = probe_file(str(path), count_packets=True)
        command = proxy_command(source=str(path), target=str(bare_path), probe=probe, recipe=recipe)
        bare_argv = list(command.argv)
        # The same transcode, run plainly: no progress pipe, no limits, no verification.
        at = bare_argv.index("-progress")
        del bare_argv[at : at + 2]
        bare, mine = [], []
        for _ in range(rounds):
            wall, cpu, _ = cpu_timed(
                lambda: subprocess.run(bare_argv, check=True, capture_output=True)
            )
            bare.append((wall, cpu))
            wall, cpu, verification = cpu_timed(ours)
            mine.append((wall, cpu))
        same = verification.sha256 == hashlib.sha256(bare_path.read_bytes()).hexdigest()
    bare_wall, bare_cpu = min(w for w, _ in bare), min(c for _, c in bare)
    ours_wall, ours_cpu = min(w for w, _ in mine), min(c for _, c in mine)
    return {
        "bare_transcode_wall_s": round(bare_wall, 2),
        "proxy_build_wall_s": round(ours_wall, 2),
        "ratio_proxy_over_bare_wall": round(ours_wall / bare_wall, 3),
        "bare_transcode_cpu_s": round(bare_cpu, 2),
        "proxy_build_cpu_s": round(ours_cpu, 2),
        "ratio_proxy_over_bare_cpu": round(ours_cpu / bare_cpu, 3),
        "same_bytes_as_bare": same,
    }


MEMORY_PROBE = r"""
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from benchmarks.bench_media import requirements_for
from media_pipeline.analysis import analyse_media
from media_pipeline.proxy import ProxyRecipe, encode_proxy, verify_proxy
from rounds.protocols import Protocol

def vm_hwm_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

path, seconds, task = {path!r}, {seconds!r}, {task!r}
if task == "analysis":
    report = analyse_media(path, requirements=requirements_for(seconds))
    assert report.analysed, report.problems
else:
    definition = Protocol.load("ai-duel-0.1").proxy_recipe
    recipe = ProxyRecipe.from_definition(definition, canvas=(640, 360))
    probe = encode_proxy(path, {target!r}, recipe=recipe)
    assert verify_proxy(probe, {target!r}, recipe=recipe).ok
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({{"python_peak_mib": vm_hwm_kib() / 1024, "ffmpeg_peak_mib": children / 1024}}))
"""


def bench_memory(path: Path, seconds: float, task: str) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        code = MEMORY_PROBE.format(
            repo=str(REPO), path=str(path), seconds=seconds, task=task,
            target=str(Path(scratch) / "proxy.mp4"),
        )  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO
        )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["worker_peak_mib"] = figures["python_peak_mib"] + figures["ffmpeg_peak_mib"]
    return {key: round(value, 1) for key, value in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default="/tmp/duel-bench-media")
    parser.add_argument("--long-minutes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2, help="best of N for the analysis")
    parser.add_argument("--proxy-rounds", type=int, default=1)
    parser.add_argument("--proxy-seconds", type=int, default=60, help="length of the proxy clip")
    parser.add_argument("--skip-proxy", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()}")

    hd = make_clip(cache / "hd-60s.mp4", seconds=60, size="1920x1080", fps=30)
    short = make_clip(cache / "small-60s.mp4", seconds=60, size="640x360", fps=30)
    long_s = args.long_minutes * 60
    long = make_clip(cache / f"small-{long_s}s.mp4", seconds=long_s, size="640x360", fps=30)

    results: dict[str, object] = {}
    results["analysis_60s_1080p30"] = bench_analysis(hd, 60, args.rounds)
    print("analysis 60 s 1080p30:", results["analysis_60s_1080p30"], flush=True)
    if not args.skip_proxy:
        recipe = ProxyRecipe.from_definition(Protocol.load("ai-duel-0.1").proxy_recipe)
        clip = hd
        if args.proxy_seconds != 60:
            clip = make_clip(
                cache / f"hd-{args.proxy_seconds}s.mp4", seconds=args.proxy_seconds,
                size="1920x1080", fps=30,
            )  # fmt: skip
        key = f"proxy_{args.proxy_seconds}s_1080p30"
        results[key] = bench_proxy(clip, recipe, args.proxy_rounds)
        print(f"{key} (1920x1080 canvas):", results[key], flush=True)
    memory: dict[str, dict] = {}
    if args.skip_memory:
        print(json.dumps(results, indent=2))
        return
    for label, path, seconds in (
        ("60s_1080p30", hd, 60),
        ("60s_640x360", short, 60),
        (f"{long_s}s_640x360", long, long_s),
    ):
        memory[f"analysis_{label}"] = bench_memory(path, seconds, "analysis")
        print(f"memory analysis {label}:", memory[f"analysis_{label}"], flush=True)
    if not args.skip_proxy:
        for label, path, seconds in (
            ("60s_640x360", short, 60),
            (f"{long_s}s_640x360", long, long_s),
        ):
            memory[f"proxy_{label}"] = bench_memory(path, seconds, "proxy")
            print(f"memory proxy {label} (640x360 canvas):", memory[f"proxy_{label}"], flush=True)
    results["memory"] = memory
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""Within-segment judging: which pair of clips a juror judges next, the clips themselves, and
the playback proof over each clip.

Protocol, "Public segment result": segment votes judge within-segment quality on the
published deterministic windows and do not measure full story quality; they are published
apart from full-film results. A juror compares the same window (same index) of two films of
the same prompt, sees no system identity, plays both clips through (the same playback proof as
full films, ``juries/playback.py``, against each clip's own probed duration), then makes a
forced choice recorded by :func:`juries.services.segment_vote_record`.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from itertools import combinations
from typing import Any

from django.db.models import Q

from juries import services
from juries.models import Juror, PanelMember, SegmentVote, SegmentWindow
from rounds.models import Round

WITHIN = SegmentWindow.Kind.WITHIN_SEGMENT


def segment_juror_active(juror: Juror, round_: Round) -> bool:
    """Whether ``juror`` sits, active, on a panel of ``round_`` (the same test as voting)."""
    return (
        juror.attrition_status == Juror.Attrition.ACTIVE
        and PanelMember.objects.filter(
            round=round_, juror=juror, status=PanelMember.Status.ACTIVE
        ).exists()
    )


def _order_key(juror: Juror, first: SegmentWindow, second: SegmentWindow) -> str:
    return hashlib.sha256(f"{juror.public_id}|{first.pk}|{second.pk}".encode()).hexdigest()


def segment_pairs_pending(juror: Juror, round_: Round) -> list[tuple[SegmentWindow, SegmentWindow]]:
    """Pairs of published within-segment windows (same prompt, same index, two films) that
    ``juror`` has not voted on in either order, as ``(shown first, shown second)``.

    Which clip plays first, and the order of pairs, come from a hash of the juror and the
    windows: stable across page loads, different between jurors, independent of the systems.
    """
    windows = SegmentWindow.objects.filter(round=round_, kind=WITHIN).select_related("film")
    groups: dict[tuple[int, int], list[SegmentWindow]] = defaultdict(list)
    for window in windows:
        groups[(window.film.package_id, window.index)].append(window)
    voted = {
        frozenset(pair)
        for pair in SegmentVote.objects.filter(juror=juror, round=round_).values_list(
            "window_a_id", "window_b_id"
        )
    }
    pending = []
    for key in sorted(groups):
        for a, b in combinations(sorted(groups[key], key=lambda w: w.pk), 2):
            if frozenset((a.pk, b.pk)) in voted or a.film_id == b.film_id:
                continue
            if _order_key(juror, a, b) > _order_key(juror, b, a):
                a, b = b, a
            pending.append((a, b))
    pending.sort(key=lambda pair: _order_key(juror, *pair))
    return pending


def film_proxy(film):
    """The ``media_pipeline.models.Proxy`` record behind a jury film: the one whose file is the
    run's proxy (the file jurors see), built from the run's accepted original."""
    from media_pipeline.models import Proxy

    proxy = (
        Proxy.objects.filter(proxy_file_id=film.run.proxy_file_id)
        .select_related("proxy_file")
        .first()
    )
    if proxy is None:
        raise services.JuryError(f"film {film.display_label} has no recorded proxy to cut from")
    return proxy


def segment_clip(window: SegmentWindow):
    """The stored clip of ``window`` (a ``media_pipeline.models.SegmentClip``), cut from the
    film's proxy with ``segments_cut`` when it does not exist yet. Cutting runs ffmpeg: call
    outside any transaction."""
    from media_pipeline.models import SegmentClip
    from media_pipeline.services import segments_cut

    proxy = film_proxy(window.film)
    start, end = round(float(window.start_s), 3), round(float(window.end_s), 3)
    existing = (
        SegmentClip.objects.filter(proxy=proxy)
        .filter(Q(start_s=start) & Q(end_s=end))
        .select_related("clip_file")
        .first()
    )
    if existing is not None:
        return existing
    return segments_cut(proxy=proxy, windows=[(start, end)])[0]


def segment_clips_precut(*, round_id: int, kind: str = SegmentWindow.Kind.WITHIN_SEGMENT) -> int:
    """Queue the cutting of every published window's clip, one media task per film.

    Called once the windows are committed, so jurors find the clips ready instead of waiting
    for ffmpeg on their first request (``segment_clip`` still cuts a missing one). A film
    without a recorded proxy is skipped here and refused on request. Returns the tasks queued.
    """
    from media_pipeline.tasks import segments_cut_task

    windows: dict[int, list[SegmentWindow]] = defaultdict(list)
    published = SegmentWindow.objects.filter(round_id=round_id, kind=kind)
    for window in published.select_related("film__run").order_by("film_id", "index"):
        windows[window.film_id].append(window)
    queued = 0
    for film_windows in windows.values():
        try:
            proxy = film_proxy(film_windows[0].film)
        except services.JuryError:
            continue
        segments_cut_task.delay(proxy.pk, [[w.start_s, w.end_s] for w in film_windows])
        queued += 1
    return queued


def clip_duration_s(clip) -> float:
    """The clip's real duration, probed (the playback proof's reference)."""
    return services.proxy_duration_s(clip.clip_file)


def segment_vote_submit(
    *,
    juror: Juror,
    first: SegmentWindow,
    second: SegmentWindow,
    choice: str,
    playback: list[dict[str, Any]] | None = None,
) -> SegmentVote:
    """Record the forced choice between the clip shown first and the one shown second, with
    the playback proof of each (first, second)."""
    if choice not in {"first", "second"}:
        raise services.JuryError("choose the first or the second clip")
    return services.segment_vote_record(
        juror=juror,
        window_a=first,
        window_b=second,
        outcome="a" if choice == "first" else "b",
        playback=playback,
    )

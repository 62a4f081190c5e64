"""``manage.py inspect_media PATH --duration-class minute_1 --aspect 16:9 --json``

Validates one local file exactly as a run's output is validated (issue 4, "Operators'
command line") and prints one JSON object with the keys ``playable``, ``video_streams``,
``audio_streams``, ``duration_s``, ``effective_duration_s``, ``display_aspect_ratio``,
``width``, ``height`` (stored pixels), ``fps``, ``conforming``, ``problems`` (codes),
``detections`` (``black``, ``frozen``, ``silence``, ``filler``, ``credits``: lists of
``{start_s, end_s}``) and ``sha256``. Exit status 0 when the file was analysed (conforming or
not), 1 when it could not be (bad or hostile input): the JSON is printed either way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from media_pipeline.analysis import analyse_media
from media_pipeline.detection import ThresholdsInvalid
from media_pipeline.ffcommand import ToolNotFound
from media_pipeline.validation import MediaRequirements
from rounds.protocols import Protocol, UnknownDurationClass, UnknownProtocol


class Command(BaseCommand):
    # A media tool: it needs no database, URLs or system checks, so it starts fast.
    requires_system_checks: list[str] = []
    help = "Validate a media file against a protocol's output requirements (never modifies it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="The file to inspect.")
        parser.add_argument("--duration-class", required=True, help="e.g. minute_1")
        parser.add_argument("--aspect", default=None, help="Required aspect ratio, e.g. 16:9")
        parser.add_argument("--protocol", default="ai-duel-0.1", help="Protocol key.")
        parser.add_argument(
            "--thresholds",
            default=None,
            help="JSON file with the round's frozen detection thresholds (default: defaults).",
        )
        parser.add_argument("--json", action="store_true", help="Print the JSON object only.")

    def handle(self, *args, **options) -> None:
        try:
            protocol = Protocol.load(options["protocol"])
            requirements = MediaRequirements.from_protocol(
                protocol, options["duration_class"], options["aspect"]
            )
            thresholds = None
            if options["thresholds"]:
                loaded = json.loads(Path(options["thresholds"]).read_text(encoding="utf-8"))
                thresholds = loaded.get("thresholds", loaded)
            report = analyse_media(
                options["path"],
                requirements=requirements,
                thresholds=thresholds,
                ffmpeg=settings.DUEL_FFMPEG,
                ffprobe=settings.DUEL_FFPROBE,
            )
        except (UnknownProtocol, UnknownDurationClass, ThresholdsInvalid, ValueError) as exc:
            raise CommandError(str(exc).strip("'\"")) from exc
        except (OSError, ToolNotFound) as exc:
            raise CommandError(f"cannot run the analysis: {exc}") from exc
        output = report.inspect_json()
        if options["json"]:
            self.stdout.write(json.dumps(output, indent=2, sort_keys=False))
        else:
            self._human(report)
        if not report.analysed:
            sys.exit(1)

    def _human(self, report) -> None:
        verdict = "conforming" if report.conforming else "NOT conforming"
        self.stdout.write(f"{verdict}; sha256 {report.sha256}")
        self.stdout.write(
            f"streams: {report.video_streams} video, {report.audio_streams} audio; "
            f"{report.width}x{report.height} display {report.display_aspect_ratio} "
            f"at {report.fps} fps"
        )
        self.stdout.write(
            f"duration {report.duration_s} s, effective {report.effective_duration_s} s"
        )
        for item in report.problems:
            self.stdout.write(f"problem {item.code}: {item.message}")
        for note in report.notes:
            self.stdout.write(f"note {note}")
        for kind, spans in report.detections.items():
            for start, end in spans:
                self.stdout.write(f"{kind}: {start:.3f}-{end:.3f} s")

"""``manage.py make_proxy IN OUT --protocol ai-duel-0.1 [--canvas 1920x1080]``

Builds the neutral review proxy of a local file by the protocol's locked recipe, verifies it
against the original and prints the verification as JSON (issue 4, "Operators' command
line"). OUT appears only when the proxy is complete and verified (written under a hidden
temporary name beside it, then renamed). Exit status 1 when the proxy failed or did not
verify.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from duel.canonical import canonical_sha256
from media_pipeline.probe import ProbeFailed
from media_pipeline.proxy import (
    ProxyEncodeFailed,
    ProxyRecipe,
    RecipeInvalid,
    WatermarkFontMissing,
    encode_proxy,
    font_sha256,
    verify_proxy,
)
from rounds.protocols import Protocol, UnknownProtocol


def _canvas(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)x(\d+)", text)
    if not match:
        raise CommandError(f"--canvas must look like 1920x1080, got {text!r}")
    return int(match[1]), int(match[2])


class Command(BaseCommand):
    # A media tool: it needs no database, URLs or system checks, so it starts fast.
    requires_system_checks: list[str] = []
    help = "Build and verify the neutral review proxy of a media file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="The original file.")
        parser.add_argument("target", help="Where to write the proxy (.mp4).")
        parser.add_argument("--protocol", default="ai-duel-0.1", help="Protocol key.")
        parser.add_argument("--canvas", default=None, help="Override the canvas, e.g. 1280x720.")

    def handle(self, *args, **options) -> None:
        try:
            recipe = ProxyRecipe.from_definition(
                Protocol.load(options["protocol"]).proxy_recipe,
                canvas=_canvas(options["canvas"]) if options["canvas"] else None,
            )
            font = font_sha256(recipe)
        except (UnknownProtocol, RecipeInvalid, WatermarkFontMissing) as exc:
            raise CommandError(str(exc)) from exc
        target = Path(options["target"])
        partial = target.with_name(f".{target.name}.partial-{secrets.token_hex(6)}")
        try:
            probe = encode_proxy(
                options["source"],
                partial,
                recipe=recipe,
                ffmpeg=settings.DUEL_FFMPEG,
                ffprobe=settings.DUEL_FFPROBE,
            )
            verification = verify_proxy(
                probe, partial, recipe=recipe, ffprobe=settings.DUEL_FFPROBE
            )
        except (ProbeFailed, ProxyEncodeFailed) as exc:
            partial.unlink(missing_ok=True)
            self.stdout.write(json.dumps({"ok": False, "error": str(exc)}, indent=2))
            sys.exit(1)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        output = verification.as_dict()
        output["recipe_sha256"] = canonical_sha256(
            {"recipe": recipe.as_dict(), "watermark_font_sha256": font}
        )
        if verification.ok:
            os.replace(partial, target)
            output["path"] = str(target)
        else:
            partial.unlink(missing_ok=True)
        self.stdout.write(json.dumps(output, indent=2))
        if not verification.ok:
            sys.exit(1)

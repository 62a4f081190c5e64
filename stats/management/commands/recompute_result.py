"""``python manage.py recompute_result SNAPSHOT_ID [--inputs FILE]``.

Recomputes a published result from its exported inputs alone and compares it with what was
published (issue 8: "so anyone can recompute the published numbers"). ``--inputs`` takes a
downloaded inputs file (``/results/<round>/inputs/<id>.json``) instead of the stored copy.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from stats.models import ResultSnapshot
from stats.selectors import snapshot_recheck


class Command(BaseCommand):
    help = (
        "Recompute a result snapshot from its exported inputs and compare it with the "
        "published result (exit status 1 on any difference)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("snapshot_id", type=int, help="the result snapshot's id")
        parser.add_argument(
            "--inputs", type=Path, help="an inputs file to recompute from (default: stored)"
        )

    def handle(self, *args, **options) -> None:
        snapshot = ResultSnapshot.objects.defer("inputs").filter(pk=options["snapshot_id"]).first()
        if snapshot is None:
            raise CommandError(f"no result snapshot {options['snapshot_id']}")
        source = options["inputs"]
        text = source.read_bytes() if source is not None else None
        check = snapshot_recheck(snapshot, text)
        self.stdout.write(
            f"snapshot {snapshot.pk} ({snapshot.result_kind} of round {snapshot.round.slug})"
        )
        self.stdout.write(f"  inputs sha256     {check.inputs_sha256}")
        self.stdout.write(f"  published sha256  {snapshot.inputs_sha256}")
        self.stdout.write(
            f"  log entry         {snapshot.log_index} "
            f"({'matches' if check.logged else 'DOES NOT MATCH'})"
        )
        if not check.inputs_match:
            raise CommandError("the inputs are not the ones published with this result")
        if not check.logged:
            raise CommandError("the calculation_inputs log entry does not match the snapshot")
        if check.differences:
            for line in check.differences:
                self.stdout.write(f"  differs: {line}")
            raise CommandError(f"{len(check.differences)} difference(s) from the published result")
        self.stdout.write(self.style.SUCCESS("  recomputed result matches the published result"))

"""``manage.py verify_log``: recompute and check the whole transparency log.

Exit status 0 when everything verifies, 1 with the first bad index otherwise (issue 3,
"Reading and verifying").
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ledger import audit, keys, services
from ledger.verifier import save_checkpoint, verify_remote


class Command(BaseCommand):
    help = (
        "Recompute the Merkle tree from the stored entries, check every entry signature, leaf "
        "hash, stored node and checkpoint, and consistency with a checkpoint saved earlier."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since-checkpoint",
            type=Path,
            metavar="FILE",
            help="a signed checkpoint saved earlier: the log must still contain that tree",
        )
        parser.add_argument(
            "--url",
            metavar="URL",
            help="verify the log served at this base URL (e.g. https://host/api/v1/log) over "
            "HTTP with this installation's public key, instead of the database",
        )
        parser.add_argument(
            "--jobs",
            type=int,
            default=os.cpu_count() or 1,
            help="processes checking entry signatures (default: one per CPU)",
        )
        parser.add_argument(
            "--save-checkpoint",
            type=Path,
            metavar="FILE",
            help="after a successful run, write the current signed checkpoint to FILE",
        )

    def handle(self, *args, **options) -> None:
        saved = None
        if options["since_checkpoint"]:
            path: Path = options["since_checkpoint"]
            if not path.is_file():
                raise CommandError(f"no checkpoint file at {path}")
            saved = path.read_text(encoding="utf-8")

        latest_note = None
        if options["url"]:
            report, latest_note = verify_remote(
                options["url"], keys.verifier_key(), saved_checkpoint=saved, jobs=options["jobs"]
            )
        else:
            report = audit.verify_database(saved_checkpoint=saved, jobs=options["jobs"])
        self.stdout.write(report.summary())
        if not report.ok:
            raise CommandError(
                f"the log does not verify; first bad index {report.first_bad_index}",
                returncode=1,
            )
        if options["save_checkpoint"]:
            if latest_note is None:
                latest_note = services.checkpoint_publish().note
            save_checkpoint(options["save_checkpoint"], latest_note)
            self.stdout.write(f"checkpoint saved to {options['save_checkpoint']}")

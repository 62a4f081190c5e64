"""``python manage.py simulate_votes ROUND --voters N --seed S``: synthetic votes for a demo."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from rounds.models import Round
from voting.simulation import SimulationRefused, votes_simulate


class Command(BaseCommand):
    help = (
        "Fill a demo round with synthetic voters of known Bradley-Terry preferences, through the "
        "same ballot service as real votes. Synthetic ballots are marked and exist only in "
        "rounds marked as demos."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("round", help="the round's slug")
        parser.add_argument("--voters", type=int, required=True, help="simulated voters")
        parser.add_argument("--seed", type=int, default=0, help="seed of strengths and choices")
        parser.add_argument(
            "--ballots-per-voter",
            type=int,
            default=10,
            help="ballots each voter casts at most (default 10; the round's cap still applies)",
        )

    def handle(self, *args, **options) -> None:
        round_ = Round.objects.filter(slug=options["round"]).first()
        if round_ is None:
            raise CommandError(f"no round with slug {options['round']!r}")
        if options["voters"] < 1 or options["ballots_per_voter"] < 1:
            raise CommandError("--voters and --ballots-per-voter must be at least 1")
        try:
            summary = votes_simulate(
                round_=round_,
                voters=options["voters"],
                seed=options["seed"],
                ballots_per_voter=options["ballots_per_voter"],
            )
        except SimulationRefused as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{summary.round}: {summary.ballots} synthetic ballots from {summary.voters} voters "
            f"over {summary.battles} battles"
        )
        for label, strength in sorted(summary.strengths.items(), key=lambda kv: -kv[1]):
            self.stdout.write(
                f"  {label}: latent strength {strength:+.3f}, wins {summary.wins.get(label, 0)}"
            )

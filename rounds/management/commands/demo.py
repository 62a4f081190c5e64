"""``python manage.py demo``: a whole demo on the embedded default, offline and idempotent.

It installs the protocol versions, creates the staff login, and operates real rounds on the
built-in reference provider: a Best Complete System round of one-minute films (systems with
different behaviours, including failures), a Common Visual Engine round whose entrants are
reference orchestrators calling the gateway over HTTP, and a Tovaki round behind its budget
gate. Every film is rendered, validated and proxied for real; every commitment is logged.
Running it again keeps what exists and only finishes what is missing.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction
from django.test.utils import override_settings
from django.utils import timezone

from duel.localserver import serving
from rounds import services
from rounds.models import Round, Run, System, SystemVersion
from rounds.protocols import Protocol
from rounds.runner import operate
from rounds.samples import sample_checklist, sample_package

ADMIN_USERNAME = "admin"
DEMO_FPS = 8

BEST_COMPLETE_SYSTEMS = [
    # name, vendor, reference provider profile, quality the synthetic voters will prefer
    ("Aurora Studio", "Aurora Labs", "good", 0.85),
    ("Bellwether Films", "Bellwether Inc.", "error_first_attempt", 0.6),
    ("Cinder Motion", "Cinder AI", "infrastructure_failure_first", 0.4),
    ("Driftwood Reels", "Driftwood", "too_short", 0.5),
]
ORCHESTRATORS = [("Ember Orchestrator", "Ember"), ("Fathom Director", "Fathom")]
TOVAKI_INTEGRATIONS = [
    ("Gale Video", "Gale", "good"),
    ("Harbor Clip", "Harbor", "good"),
    ("Iris Motion", "Iris", "error_first_attempt"),
    ("Juniper Gen", "Juniper", "no_audio"),
]


class Command(BaseCommand):
    help = "Create and operate demo rounds on the embedded default (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--prompts", type=int, default=2, help="prompts per round")
        parser.add_argument("--skip-engine", action="store_true", help="no common-engine round")
        parser.add_argument("--voters", type=int, default=120, help="synthetic demo voters")
        parser.add_argument(
            "--site-url",
            default="http://127.0.0.1:8000",
            help="where the site will be served, for the links printed at the end",
        )

    def handle(self, *args, **options):
        for key in ("ai-duel-0.1", "tovaki-2026-r1"):
            services.protocol_version_install(key=key)
        password = self._admin()
        bcs = self._best_complete_system_round(options["prompts"])
        self._operate(bcs)
        if not options["skip_engine"]:
            cve = self._common_engine_round(options["prompts"])
            with serving() as base_url, override_settings(DUEL_PUBLIC_BASE_URL=base_url):
                self._operate(cve)
        tovaki = self._tovaki_round()
        self._operate(tovaki)
        self._votes(bcs, options["voters"])
        self._summary(password, options["site_url"].rstrip("/"))

    # -- set-up

    def _admin(self) -> str:
        """The staff login; its password is kept in var/ so every run prints the same one."""
        secret_file = Path(settings.VAR_DIR) / "admin-password.txt"
        user_model = get_user_model()
        user = user_model.objects.filter(username=ADMIN_USERNAME).first()
        if user is not None and secret_file.exists():
            return secret_file.read_text().strip()
        password = secrets.token_urlsafe(12)
        secret_file.parent.mkdir(parents=True, exist_ok=True)
        secret_file.write_text(password + "\n")
        secret_file.chmod(0o600)
        if user is None:
            user_model.objects.create_superuser(ADMIN_USERNAME, "admin@duel.local", password)
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        return password

    def _system(self, name: str, vendor: str, **fields) -> SystemVersion:
        system, _ = System.objects.get_or_create(name=name, defaults={"vendor": vendor})
        version, _ = SystemVersion.objects.get_or_create(
            system=system,
            version="1.0",
            customer_tier=fields.pop("customer_tier", "pro"),
            defaults={"settings": {"quality": "high"}, **fields},
        )
        return version

    @transaction.atomic
    def _new_round(self, slug: str, **fields) -> tuple[Round, bool]:
        existing = Round.objects.filter(slug=slug).first()
        if existing is not None:
            return existing, False
        version = services.protocol_version_install(key=fields.pop("protocol"))
        round_ = Round.objects.create(
            slug=slug,
            protocol_version=version,
            is_demo=True,
            deadline=timezone.now() + timedelta(days=14),
            currency=fields.pop("currency", "USD"),
            **fields,
        )
        return round_, True

    def _packages(self, round_: Round, prompts: int, aspect: str) -> None:
        for index in range(prompts):
            services.package_add(
                round_=round_,
                prompt_key=f"P{index + 1}",
                content=sample_package(
                    index, duration_class=round_.duration_class, aspect_ratio=aspect
                ),
                checklist=sample_checklist(index),
            )

    def _best_complete_system_round(self, prompts: int) -> Round:
        round_, created = self._new_round(
            "demo-minute-1",
            protocol="ai-duel-0.1",
            title="Demo: Complete Narrative Minute (Best Complete System)",
            result_type="leaderboard",
            benchmark_class="best_complete_system",
            prompt_track="brief_to_film",
            duration_class="minute_1",
            aspect_ratio="16:9",
            budget_per_system=Decimal("50.00"),
            cost_ceiling=Decimal("60.00"),
            retry_limit=2,
            human_action_cap=0,
            voting_settings={"allow_ties": False, "show_identities_after_vote": False},
        )
        if created:
            self._packages(round_, prompts, "16:9")
            for name, vendor, profile, quality in BEST_COMPLETE_SYSTEMS:
                services.entry_add(
                    round_=round_,
                    system_version=self._system(name, vendor),
                    provider_config={
                        "adapter": "reference",
                        "profile": profile,
                        "quality": quality,
                        "fps": DEMO_FPS,
                        "system": name,
                    },
                )
            services.disclosure_add(
                kind="sponsor",
                party="Demo Foundation",
                text="The demo round's compute was paid by the Demo Foundation (fictional).",
                round_=round_,
            )
            round_ = services.round_commit(round_=round_, actor="demo")
            round_ = services.round_open(round_=round_, actor="demo")
        return round_

    def _common_engine_round(self, prompts: int) -> Round:
        controls = {
            "engine_provider": "duel-reference",
            "engine_model_id": "ref-video-1",
            "api_version": "2026-01",
            "provider_region": "local",
            "account_tier": "standard",
            "permitted_parameters": {"seconds": {"min": 1, "max": 10}, "audio": {}},
            "resolution": "320x180",
            "permitted_engine_inputs": ["text"],
            "credit_limit_per_system": "200.00",
            "production_budget_per_system": "100.00",
            "deadline": (timezone.now() + timedelta(days=14)).isoformat(),
            "technical_retry_limit": 1,
            "human_action_limit": 0,
            "rate_limit_and_concurrency": {
                "requests_per_minute": 120,
                "concurrency": 2,
                "engine_slots": 1,
            },
            "native_audio_replaceable": True,
            "credits_per_second": "1",
        }
        round_, created = self._new_round(
            "demo-engine-minute-1",
            protocol="ai-duel-0.1",
            title="Demo: Common Visual Engine, one-minute films",
            result_type="head_to_head",
            benchmark_class="common_visual_engine",
            prompt_track="brief_to_film",
            duration_class="minute_1",
            aspect_ratio="16:9",
            budget_per_system=Decimal("100.00"),
            cost_ceiling=Decimal("120.00"),
            credit_limit_per_system=Decimal("200.00"),
            retry_limit=1,
            human_action_cap=0,
            engine_controls=controls,
        )
        if created:
            self._packages(round_, prompts, "16:9")
            for index, (name, vendor) in enumerate(ORCHESTRATORS):
                version = self._system(name, vendor)
                entry = services.entry_add(round_=round_, system_version=version)
                token = services.entry_issue_gateway_token(entry=entry)
                # The reference orchestrators are operated by the platform, so their token is
                # kept in their adapter config (never recorded in the run's settings).
                type(entry).objects.filter(pk=entry.pk).update(
                    provider_config={
                        "adapter": "reference_orchestrator",
                        "token": token,
                        "plan": {
                            "params": {"resolution": "320x180"},
                            "shot_seconds": 10,
                            "takes_per_shot": 1 + index,
                            "fps": DEMO_FPS,
                        },
                    }
                )
            round_ = services.round_commit(round_=round_, actor="demo")
            round_ = services.round_open(round_=round_, actor="demo")
        return round_

    def _tovaki_round(self) -> Round:
        """A round of Tovaki's fixed scope, read from its definition: one package per task
        lane, one entry per model integration at the scope's tier, the budget gate's planned
        and hard-maximum credits shared among the integrations."""
        protocol = Protocol.load("tovaki-2026-r1")
        scope, gate = protocol.fixed_scope, protocol.budget_gate
        integrations = Decimal(scope["model_integrations"])
        duration_class = next(
            name
            for name, spec in protocol.duration_classes.items()
            if spec["target_s"] == scope["duration_seconds"]
        )
        aspect = scope["aspect_ratio"]
        round_, created = self._new_round(
            "demo-tovaki",
            protocol=protocol.key,
            title="Demo: Tovaki blind benchmark (4 integrations x 6 task lanes)",
            result_type="leaderboard",
            benchmark_class="best_complete_system",
            prompt_track="brief_to_film",
            duration_class=duration_class,
            aspect_ratio=aspect,
            currency=gate["currency"],
            budget_per_system=Decimal(gate["first_pass_planned_credits"]) / integrations,
            cost_ceiling=Decimal(gate["hard_maximum_with_one_technical_retry_per_cell"])
            / integrations,
            retry_limit=1,
            human_action_cap=0,
        )
        if created:
            for index, lane in enumerate(protocol.task_lanes):
                services.package_add(
                    round_=round_,
                    prompt_key=f"T{index + 1}",
                    task_lane=lane,
                    content=sample_package(
                        index, duration_class=duration_class, aspect_ratio=aspect
                    ),
                    checklist=sample_checklist(index),
                )
            tier = scope["resolution_tier"]
            for name, vendor, profile in TOVAKI_INTEGRATIONS[: scope["model_integrations"]]:
                services.entry_add(
                    round_=round_,
                    system_version=self._system(name, vendor, customer_tier=tier),
                    provider_config={
                        "adapter": "reference",
                        "profile": profile,
                        "short_side": int(tier.removesuffix("p")),
                        "fps": 24,
                        "system": name,
                    },
                )
            round_ = services.round_commit(round_=round_, actor="demo")
            round_ = services.round_open(round_=round_, actor="demo")
            admin = get_user_model().objects.get(username=ADMIN_USERNAME)
            gate = round_.protocol.budget_gate
            services.budget_approve(
                round_=round_,
                owner=admin,
                limit_credits=Decimal(str(gate["first_pass_planned_credits"])),
            )
        return round_

    # -- operating

    def _operate(self, round_: Round) -> None:
        for entry in round_.entries.order_by("label"):
            for package in round_.packages.order_by("prompt_key"):
                run = Run.objects.filter(entry=entry, package=package).first()
                if run is None:
                    run = services.run_create(entry=entry, package=package)
                if run.state == Run.State.FINISHED and run.manifests.exists():
                    continue
                self.stdout.write(f"  operating {round_.slug} {entry.label} {package.prompt_key}…")
                run = operate(run.pk)
                self.stdout.write(f"    {run.final_state}")

    def _votes(self, round_: Round, voters: int) -> None:
        if round_.state == Round.State.OPEN:
            round_ = services.round_transition(round_=round_, to=Round.State.JUDGING, actor="demo")
        try:
            from voting.models import Ballot
        except ImportError:  # the voting app is optional for this command
            return
        if not Ballot.objects.filter(round=round_).exists():
            call_command("simulate_votes", round_.slug, voters=voters, seed=7)

    def _summary(self, password: str, site: str) -> None:
        self.stdout.write(self.style.SUCCESS("\nDemo ready."))
        self.stdout.write(f"  Staff admin:  {site}/admin/  ({ADMIN_USERNAME} / {password})")
        self.stdout.write(f"  Vote blind:   {site}/vote/")
        self.stdout.write(f"  Results:      {site}/results/")
        self.stdout.write(f"  Log:          {site}/api/v1/log/checkpoint")

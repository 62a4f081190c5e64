"""The failure taxonomy, the protocol retry-reason mapping, costs and the polling helper."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path

import pytest

from rounds.gateways.base import (
    FAILURE_CLASSES,
    CostReport,
    FailureReason,
    FailureReasonMapError,
    JobState,
    JobStatus,
    ProviderError,
    ProviderTimeout,
    SafetyBlock,
    Submission,
    SystemProvider,
    await_job,
    failure_for,
    failure_reason_map,
    protocol_retry_reason,
)
from rounds.protocols import PROTOCOL_KEYS, Protocol


def test_every_failure_reason_has_one_exception_class_with_that_code():
    assert set(FAILURE_CLASSES) == set(FailureReason)
    for reason, cls in FAILURE_CLASSES.items():
        failure = cls("boom", provider_request_id="r1")
        assert failure.reason == reason
        assert failure.to_json()["reason"] == str(reason)
        assert failure.to_json()["provider_request_id"] == "r1"
    assert isinstance(failure_for("timeout", "late"), ProviderTimeout)


@pytest.mark.parametrize("key", PROTOCOL_KEYS)
def test_failure_map_covers_every_code_and_names_only_allowed_reasons(key):
    protocol = Protocol.load(key)
    table = failure_reason_map(protocol)
    assert set(table) == set(FailureReason)
    for code, name in table.items():
        assert name is None or name in protocol.retry_reasons, (code, name)
    # Every retry reason the protocol allows is reachable from some failure code.
    assert {n for n in table.values() if n} == set(protocol.retry_reasons)
    assert table[FailureReason.SAFETY_BLOCK] is None


@pytest.mark.parametrize(
    ("key", "failure", "expected"),
    [
        # AI Duel: Run rules list explicit error, empty, unplayable, missing stream, infra.
        ("ai-duel-0.1", ProviderError("x"), "provider_error"),
        ("ai-duel-0.1", FailureReason.EMPTY_FILE, "empty_file"),
        ("ai-duel-0.1", FailureReason.TIMEOUT, None),
        ("ai-duel-0.1", FailureReason.WRONG_DURATION_OR_RESOLUTION, None),
        ("ai-duel-0.1", SafetyBlock("x"), None),
        # Tovaki: its own names for the technical reasons.
        ("tovaki-2026-r1", FailureReason.TIMEOUT, "timeout"),
        ("tovaki-2026-r1", FailureReason.UNPLAYABLE_FILE, "corrupt_or_unplayable_file"),
        ("tovaki-2026-r1", FailureReason.MISSING_STREAM, "missing_required_audio_track"),
        (
            "tovaki-2026-r1",
            "wrong_duration_or_resolution",
            "wrong_duration_or_resolution_from_provider",
        ),
        ("tovaki-2026-r1", SafetyBlock("x"), None),
    ],
)
def test_protocol_retry_reason(key, failure, expected):
    assert protocol_retry_reason(Protocol.load(key), failure) == expected


def _with_map(key: str, **changes) -> Protocol:
    definition = copy.deepcopy(Protocol.load(key).definition)
    definition["retry_policy"]["failure_reason_map"].update(changes)
    return Protocol(definition)


def test_a_map_that_retries_a_safety_block_is_refused():
    with pytest.raises(FailureReasonMapError, match="safety block"):
        failure_reason_map(_with_map("ai-duel-0.1", safety_block="provider_error"))


def test_a_map_naming_an_unlisted_retry_reason_is_refused():
    with pytest.raises(FailureReasonMapError, match="not in retry_policy.allowed_reasons"):
        failure_reason_map(_with_map("ai-duel-0.1", timeout="timeout"))


def test_a_map_missing_a_code_is_refused():
    definition = copy.deepcopy(Protocol.load("tovaki-2026-r1").definition)
    del definition["retry_policy"]["failure_reason_map"]["empty_file"]
    with pytest.raises(FailureReasonMapError, match="empty_file"):
        failure_reason_map(Protocol(definition))


def test_cost_report_adds_checks_names_and_serialises_exactly():
    a = CostReport("USD", {"billed_cost": 0.1, "public_list_cost": "0.2"}, {"seconds": 2})
    b = CostReport("USD", {"billed_cost": Decimal("0.2")}, {"seconds": 3})
    total = a + b
    assert total.amount("billed_cost") == Decimal("0.3")  # no float drift
    assert total.amount("sponsor_credit") == Decimal(0)
    assert total.units == {"seconds": 5}
    assert total.to_json()["amounts"] == {"billed_cost": "0.3", "public_list_cost": "0.2"}
    total.check_fields(Protocol.load("ai-duel-0.1").cost_fields)
    with pytest.raises(ValueError, match="tip"):
        CostReport("USD", {"tip": 1}).check_fields(Protocol.load("ai-duel-0.1").cost_fields)
    with pytest.raises(ValueError, match="EUR"):
        a + CostReport("EUR", {"billed_cost": 1})


class _ScriptedProvider(SystemProvider):
    """Returns a scripted sequence of states from poll."""

    def __init__(self, states: list[JobStatus]) -> None:
        self.states = states
        self.polls = 0

    def submit(self, brief, settings, *, seed, idempotency_key=None):
        return Submission("r", "r")

    def poll(self, request_id):
        status = self.states[min(self.polls, len(self.states) - 1)]
        self.polls += 1
        return status

    def fetch(self, request_id, dest_path: Path):
        raise NotImplementedError

    def cost(self, request_id):
        return CostReport.zero("USD")


class _FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_await_job_returns_on_success_after_polling():
    provider = _ScriptedProvider(
        [JobStatus(JobState.QUEUED), JobStatus(JobState.RUNNING), JobStatus(JobState.SUCCEEDED)]
    )
    clock = _FakeClock()
    status = await_job(
        provider, "r", timeout_s=10, poll_interval_s=1, clock=clock, sleep=clock.sleep
    )
    assert status.state == JobState.SUCCEEDED
    assert provider.polls == 3 and clock.sleeps == [1, 1]


def test_await_job_raises_the_jobs_failure():
    provider = _ScriptedProvider([JobStatus(JobState.FAILED, error=SafetyBlock("blocked"))])
    with pytest.raises(SafetyBlock):
        await_job(provider, "r", timeout_s=10, poll_interval_s=1, sleep=lambda s: None)


def test_await_job_times_out_at_the_deadline_without_oversleeping():
    provider = _ScriptedProvider([JobStatus(JobState.RUNNING)])
    clock = _FakeClock()
    with pytest.raises(ProviderTimeout) as info:
        await_job(provider, "r", timeout_s=2.5, poll_interval_s=1, clock=clock, sleep=clock.sleep)
    assert info.value.reason == FailureReason.TIMEOUT
    assert info.value.detail["last_state"] == "running"
    assert clock.sleeps == [1, 1, 0.5]

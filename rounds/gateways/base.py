"""The two provider interfaces, what they return, and the failure taxonomy.

Protocol "Run rules": the platform operates every ranked system itself (submit the committed
brief, wait, accept the first technically valid result) and may retry only for a technical
reason the protocol names. Protocol "Common-engine controls": entrants' orchestrators call the
one video engine through the gateway, which records every engine measure. This module is the
contract both of those sit on:

* :class:`SystemProvider` - a complete production system behind an asynchronous job API
  (submit, poll, fetch, cost).
* :class:`VideoEngine` - the common visual engine (one synchronous clip per call).
* :class:`ProviderFailure` and its subclasses - every failure carries a stable ``reason`` code
  (:class:`FailureReason`); :func:`protocol_retry_reason` maps a code onto the retry reason
  names of a protocol, read from its definition (``retry_policy.allowed_reasons`` and
  ``retry_policy.failure_reason_map``).

Pure Python: no Django here.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rounds.protocols import Protocol


class FailureReason(StrEnum):
    """Our stable failure codes. Protocol names for them come from the definitions."""

    PROVIDER_ERROR = "provider_error"
    INFRASTRUCTURE_FAILURE = "infrastructure_failure"
    TIMEOUT = "timeout"
    EMPTY_FILE = "empty_file"
    UNPLAYABLE_FILE = "unplayable_file"
    MISSING_STREAM = "missing_stream"
    SAFETY_BLOCK = "safety_block"
    WRONG_DURATION_OR_RESOLUTION = "wrong_duration_or_resolution"


class JobState(StrEnum):
    """Where a provider job is (not why it ended: that is a :class:`FailureReason`)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


# Costs (protocol: Cost reporting)


def _as_decimal(value: Any) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        # Through str so 0.1 stays 0.1 rather than its binary expansion.
        return Decimal(str(value))
    return Decimal(value)


@dataclass(frozen=True)
class CostReport:
    """Costs of one provider job or engine call, keyed by the protocol's cost field names.

    The field names (``billed_cost``, ``public_list_cost``...) belong to the protocol's
    ``cost_fields``; adapters fill the ones they know and callers check them against the
    definition with :meth:`check_fields`, so no second list of names lives here. Amounts are
    :class:`~decimal.Decimal` in ``currency``. ``units`` holds metered quantities the cost was
    computed from (``generated_seconds``, ``bytes``), for the record.
    """

    currency: str
    amounts: Mapping[str, Decimal] = field(default_factory=dict)
    units: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "amounts", {name: _as_decimal(v) for name, v in dict(self.amounts).items()}
        )
        object.__setattr__(self, "units", dict(self.units))

    @classmethod
    def zero(cls, currency: str) -> CostReport:
        """No charge (an attempt the provider did not bill)."""
        return cls(currency=currency)

    def amount(self, field_name: str) -> Decimal:
        """The amount for one cost field; a field the adapter did not report is zero."""
        return self.amounts.get(field_name, Decimal(0))

    def check_fields(self, cost_fields: Iterable[str]) -> None:
        """Raise ``ValueError`` if an amount is keyed by a name the protocol does not list."""
        allowed = set(cost_fields)
        unknown = sorted(set(self.amounts) - allowed)
        if unknown:
            raise ValueError(
                f"cost fields {unknown} are not in the protocol's cost_fields {sorted(allowed)}"
            )

    def __add__(self, other: CostReport) -> CostReport:
        if not isinstance(other, CostReport):
            return NotImplemented
        if other.currency != self.currency:
            raise ValueError(f"cannot add costs in {self.currency} and {other.currency}")
        amounts = dict(self.amounts)
        for name, value in other.amounts.items():
            amounts[name] = amounts.get(name, Decimal(0)) + value
        units = dict(self.units)
        for name, value in other.units.items():
            units[name] = units.get(name, 0) + value
        return CostReport(currency=self.currency, amounts=amounts, units=units)

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe form (amounts as strings, so no float rounding enters a manifest)."""
        return {
            "currency": self.currency,
            "amounts": {name: str(v) for name, v in sorted(self.amounts.items())},
            "units": dict(sorted(self.units.items())),
        }


# Failures


class ProviderFailure(Exception):
    """A failure of a provider job or engine call, classified for the run rules.

    ``reason`` is the stable code; ``provider_request_id`` and ``cost`` are set when known so
    the run can "record the failed attempt and its cost" (protocol: Run rules).
    """

    reason: FailureReason = FailureReason.PROVIDER_ERROR

    def __init__(
        self,
        message: str,
        *,
        provider_request_id: str | None = None,
        cost: CostReport | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider_request_id = provider_request_id
        self.cost = cost
        self.detail = dict(detail or {})

    def to_json(self) -> dict[str, Any]:
        """What a run or gateway log records about this failure."""
        return {
            "reason": str(self.reason),
            "message": self.message,
            "provider_request_id": self.provider_request_id,
            "cost": self.cost.to_json() if self.cost else None,
            "detail": self.detail,
        }


class ProviderError(ProviderFailure):
    """The provider returned an explicit error (a failed job state, a refused request)."""

    reason = FailureReason.PROVIDER_ERROR


class InfrastructureFailure(ProviderFailure):
    """The provider's infrastructure failed (HTTP 5xx, connection refused or reset)."""

    reason = FailureReason.INFRASTRUCTURE_FAILURE


class ProviderTimeout(ProviderFailure):
    """No answer within the request timeout, or the job outlived the deadline given."""

    reason = FailureReason.TIMEOUT


class EmptyFile(ProviderFailure):
    """The delivered asset has no bytes."""

    reason = FailureReason.EMPTY_FILE


class UnplayableFile(ProviderFailure):
    """The delivered asset cannot be probed or decoded."""

    reason = FailureReason.UNPLAYABLE_FILE


class MissingStream(ProviderFailure):
    """The delivered asset lacks a required video or audio stream (``detail['stream']``)."""

    reason = FailureReason.MISSING_STREAM


class SafetyBlock(ProviderFailure):
    """The provider refused the request on safety grounds. Never a retry reason."""

    reason = FailureReason.SAFETY_BLOCK


class WrongDurationOrResolution(ProviderFailure):
    """The delivered asset's duration or frame size is not what the brief required."""

    reason = FailureReason.WRONG_DURATION_OR_RESOLUTION


FAILURE_CLASSES: dict[FailureReason, type[ProviderFailure]] = {
    cls.reason: cls
    for cls in (
        ProviderError,
        InfrastructureFailure,
        ProviderTimeout,
        EmptyFile,
        UnplayableFile,
        MissingStream,
        SafetyBlock,
        WrongDurationOrResolution,
    )
}


class AdapterConfigurationError(ValueError):
    """Our configuration is wrong (no token in the environment, unknown adapter or profile).

    Not a :class:`ProviderFailure`: the provider was never asked, so it is no retry reason.
    """


class JobNotFinished(RuntimeError):
    """``fetch`` was called for a job that has not succeeded yet: a caller error, not a
    provider failure (poll until ``succeeded`` first)."""


def failure_for(reason: FailureReason | str, message: str, **kwargs: Any) -> ProviderFailure:
    """Build the exception for a reason code (for callers that classify outside an adapter)."""
    return FAILURE_CLASSES[FailureReason(reason)](message, **kwargs)


# Protocol retry reasons (protocol: Run rules; Tovaki retry_policy)


class FailureReasonMapError(ValueError):
    """A protocol's failure reason map is incomplete or names an unlisted retry reason."""


def failure_reason_map(protocol: Protocol) -> dict[FailureReason, str | None]:
    """The protocol's table from our failure codes to its retry reason names (or ``None``).

    Read from the definition's ``retry_policy.failure_reason_map`` and checked: it must cover
    every code, every name must be one of ``retry_policy.allowed_reasons``, and
    ``safety_block`` must map to ``None`` (a safety block ends the run ``policy_blocked``; it
    is never retried).
    """
    table = (protocol.section("retry_policy") or {}).get("failure_reason_map")
    if not isinstance(table, dict):
        raise FailureReasonMapError(f"{protocol.key} defines no retry_policy.failure_reason_map")
    missing = sorted(set(FailureReason) - set(table))
    unknown = sorted(set(table) - set(FailureReason))
    if missing or unknown:
        raise FailureReasonMapError(
            f"{protocol.key} failure_reason_map: missing codes {missing}, unknown codes {unknown}"
        )
    allowed = set(protocol.retry_reasons)
    result: dict[FailureReason, str | None] = {}
    for code, name in table.items():
        if name is not None and name not in allowed:
            raise FailureReasonMapError(
                f"{protocol.key} failure_reason_map maps {code!r} to {name!r}, "
                f"which is not in retry_policy.allowed_reasons {sorted(allowed)}"
            )
        result[FailureReason(code)] = name
    if result[FailureReason.SAFETY_BLOCK] is not None:
        raise FailureReasonMapError(f"{protocol.key}: a safety block can never be a retry reason")
    return result


def protocol_retry_reason(
    protocol: Protocol, failure: ProviderFailure | FailureReason | str
) -> str | None:
    """The protocol's retry reason name for a failure, or ``None`` if it permits no retry.

    ``None`` means the failure ends the attempt without a technical retry; which final state it
    ends in is the run workflow's rule (a safety block ends ``policy_blocked``).
    """
    code = failure.reason if isinstance(failure, ProviderFailure) else FailureReason(failure)
    return failure_reason_map(protocol)[code]


# What the interfaces return


@dataclass(frozen=True)
class Submission:
    """A provider's acknowledgement of a submitted job. Store ``request_id`` before polling."""

    request_id: str
    provider_request_id: str


@dataclass(frozen=True)
class JobStatus:
    """One poll. ``error`` is set when ``state`` is ``failed`` (raise it to fail the attempt)."""

    state: JobState
    progress: float | None = None
    error: ProviderFailure | None = None

    @property
    def finished(self) -> bool:
        return self.state in (JobState.SUCCEEDED, JobState.FAILED)


@dataclass(frozen=True)
class FetchedAsset:
    """The final asset of a succeeded job, written to disk, with what it cost."""

    path: Path
    size_bytes: int
    cost: CostReport
    provider_request_id: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineClip:
    """One clip the video engine generated (protocol: engine measures)."""

    path: Path
    seconds: float
    cost: CostReport
    provider_request_id: str
    details: Mapping[str, Any] = field(default_factory=dict)


# The interfaces


class SystemProvider(abc.ABC):
    """A complete production system behind an asynchronous job API (Best Complete System).

    The run workflow calls ``submit`` once per attempt, stores ``request_id``, ``poll``s until
    the job finishes, then ``fetch``es the asset. It passes the attempt's ``idempotency_key``:
    a worker that died after the provider accepted the job but before the platform stored
    its id submits again with the same key, and the provider answers with the job it already
    has instead of starting (and billing) a second one. ``poll`` never blocks. A failure of the call
    itself (5xx, timeout) raises a :class:`ProviderFailure`; a job the provider reports failed
    comes back as ``JobStatus(state=failed, error=...)``. ``cost`` reports what a job cost,
    including a failed one.
    """

    @abc.abstractmethod
    def submit(
        self,
        brief: dict[str, Any],
        settings: dict[str, Any],
        *,
        seed: int,
        idempotency_key: str | None = None,
    ) -> Submission:
        """Submit the exact committed brief with the recorded settings.

        The same ``idempotency_key`` again returns the job it first created.
        """

    @abc.abstractmethod
    def poll(self, request_id: str) -> JobStatus:
        """The job's current state, without waiting."""

    @abc.abstractmethod
    def fetch(self, request_id: str, dest_path: Path) -> FetchedAsset:
        """Stream the final asset of a succeeded job to ``dest_path`` (atomically)."""

    @abc.abstractmethod
    def cost(self, request_id: str) -> CostReport:
        """What the job has cost so far (for failed attempts too)."""


EngineCall = Callable[..., EngineClip]
"""``(prompt, params, *, seed, dest_path) -> EngineClip``: a VideoEngine.generate or a client."""


class VideoEngine(abc.ABC):
    """The common visual engine: one clip per call (Common Visual Engine class)."""

    @abc.abstractmethod
    def generate(
        self, prompt: str, params: dict[str, Any], *, seed: int, dest_path: Path
    ) -> EngineClip:
        """Generate one clip for ``prompt`` with permitted ``params`` into ``dest_path``."""


def await_job(
    provider: SystemProvider,
    request_id: str,
    *,
    timeout_s: float,
    poll_interval_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> JobStatus:
    """Poll until the job finishes; raise its failure, or :class:`ProviderTimeout` at the deadline.

    A convenience for synchronous callers (the HTTP video engine, tests). The run workflow may
    poll step by step instead, from its own task, against the round's deadline.
    """
    deadline = clock() + timeout_s
    while True:
        status = provider.poll(request_id)
        if status.state == JobState.SUCCEEDED:
            return status
        if status.state == JobState.FAILED:
            assert status.error is not None
            raise status.error
        remaining = deadline - clock()
        if remaining <= 0:
            raise ProviderTimeout(
                f"job {request_id} still {status.state} after {timeout_s:g} s",
                provider_request_id=request_id,
                detail={"last_state": str(status.state), "timeout_s": timeout_s},
            )
        sleep(min(poll_interval_s, remaining))

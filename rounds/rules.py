"""Pure protocol rules for rounds and runs (no Django): read from the protocol definition.

Each function takes a :class:`rounds.protocols.Protocol` and plain values, so the rules are
table-tested against both protocol definitions without a database.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rounds.gateways.base import FailureReason
from rounds.protocols import Protocol

# The platform's failure codes: the gateways' taxonomy (media validation maps onto it too).
FAILURE_CODES: tuple[str, ...] = tuple(str(reason) for reason in FailureReason)

# Media validation problem codes that make an output technically invalid, and the failure
# code each one is (protocol: Run rules, "Permit a retry only after one of these events").
TECHNICAL_PROBLEM_FAILURES: dict[str, str] = {
    "file_empty": "empty_file",
    "unreadable": "unplayable_file",
    "not_playable": "unplayable_file",
    "no_video_stream": "unplayable_file",
    "no_audio_stream": "missing_stream",
    # The platform could not play it within its bounds (hostile or absurd files).
    "analysis_timeout": "unplayable_file",
    "too_many_streams": "unplayable_file",
    "resolution_too_large": "unplayable_file",
    "duration_too_long": "unplayable_file",
}


@dataclass(frozen=True)
class RetryDecision:
    """What happens after a failed attempt."""

    retry: bool
    protocol_reason: str | None
    final_state: str | None
    explanation: str


def retry_limit(protocol: Protocol, round_retry_limit: int | None) -> int:
    """The effective technical retry limit: the round's, capped by the protocol's maximum."""
    limits = [x for x in (round_retry_limit, protocol.maximum_retries) if x is not None]
    return min(limits) if limits else 0


def retry_decision(
    protocol: Protocol,
    *,
    failure_code: str,
    retries_used: int,
    round_retry_limit: int | None,
    deadline_passed: bool = False,
    budget_exhausted: bool = False,
) -> RetryDecision:
    """Decide whether a failed attempt may be retried (protocol: Run rules; Tovaki retry_policy).

    Creative retries never exist here: only a failure code from :data:`FAILURE_CODES` reaches
    this function, and only codes the protocol maps to an allowed retry reason are retried.
    """
    if failure_code not in FAILURE_CODES:
        raise ValueError(f"unknown failure code {failure_code!r}")
    policy = protocol.definition["retry_policy"]
    when_not_retried = policy["final_state_when_not_retried"][failure_code]
    if failure_code == "safety_block":
        return RetryDecision(False, None, "policy_blocked", "the provider blocked the request")
    if deadline_passed:
        return RetryDecision(False, None, "deadline_exceeded", "the round deadline has passed")
    if budget_exhausted:
        return RetryDecision(False, None, "budget_exhausted", "the reserved budget is spent")
    reason = policy["failure_reason_map"].get(failure_code)
    if reason is None or reason not in protocol.retry_reasons:
        return RetryDecision(
            False,
            None,
            when_not_retried,
            f"{failure_code} is not a retry reason under {protocol.key}",
        )
    limit = retry_limit(protocol, round_retry_limit)
    if retries_used >= limit:
        return RetryDecision(
            False, reason, when_not_retried, f"retry limit {limit} reached ({failure_code})"
        )
    return RetryDecision(True, reason, None, f"technical retry {retries_used + 1} of {limit}")


def technical_failure(problems: list[str]) -> str | None:
    """The failure code for the first technical defect in a validation report, if any."""
    for problem in problems:
        if problem in TECHNICAL_PROBLEM_FAILURES:
            return TECHNICAL_PROBLEM_FAILURES[problem]
    return None


# ---------------------------------------------------------------------------
# Input packages (protocol: Prompt commitment, Prompt tracks)


def package_problems(
    protocol: Protocol, *, prompt_track: str, duration_class: str, content: dict[str, Any]
) -> list[str]:
    """Human-readable reasons a package cannot be committed; empty when it is complete."""
    spec = protocol.definition["input_package"]
    problems = []
    if not isinstance(content, dict):
        return ["the input package must be a JSON object"]
    for item in spec["required_items"]:
        value = content.get(item)
        if value in (None, "", [], {}):
            problems.append(f"missing required item {item!r}")
    if prompt_track == "script_to_film":
        for item in spec["script_to_film_items"]:
            if content.get(item) in (None, "", [], {}):
                problems.append(f"Script-to-Film needs {item!r}")
    if prompt_track == "brief_to_film":
        for item in spec["brief_to_film_forbidden_items"]:
            if item in content:
                problems.append(
                    f"a Brief-to-Film package must not prescribe a {item.replace('_', ' ')}: "
                    "the system creates its own plan"
                )
    field = spec["duration_variant_field"]
    if content.get(field) not in (None, duration_class):
        problems.append(
            f"the package's {field} {content.get(field)!r} differs from the round's "
            f"{duration_class!r}"
        )
    return problems


def fixed_scope_problems(
    protocol: Protocol,
    *,
    duration_class: str,
    aspect_ratio: str,
    package_lanes: list[str],
    entry_tiers: list[str],
) -> list[str]:
    """Why a round does not match its protocol's fixed scope; empty when it does or has none.

    Tovaki fixes the design: ``model_integrations`` entries times one package per task lane
    make the ``first_take_cells``, each a ``duration_seconds`` clip at ``aspect_ratio`` from an
    integration recorded at ``resolution_tier``. ``package_lanes`` holds each package's task
    lane and ``entry_tiers`` each entry's recorded tier. Native audio is the output
    requirement of one audio stream, checked on every film by media validation.
    """
    scope = protocol.fixed_scope
    if not scope:
        return []
    problems = []
    integrations = scope["model_integrations"]
    if len(entry_tiers) != integrations:
        problems.append(
            f"the fixed scope has exactly {integrations} model integrations; "
            f"the round has {len(entry_tiers)} entries"
        )
    lanes = protocol.task_lanes
    unknown = sorted({lane for lane in package_lanes if lane not in lanes})
    if unknown:
        problems.append(
            f"task lanes not in {protocol.key}: {', '.join(repr(x) for x in unknown)}"
            f" (the lanes are {', '.join(lanes)})"
        )
    if "" in package_lanes:
        problems.append("every package needs its task lane")
    repeated = sorted({lane for lane in package_lanes if lane and package_lanes.count(lane) > 1})
    if repeated:
        problems.append(f"one package per task lane; repeated: {', '.join(repeated)}")
    missing = [lane for lane in lanes if lane not in package_lanes]
    if missing:
        problems.append(f"task lanes without a package: {', '.join(missing)}")
    cells = len(entry_tiers) * len(package_lanes)
    if not problems and cells != scope["first_take_cells"]:
        problems.append(
            f"the fixed scope has {scope['first_take_cells']} first-take cells; "
            f"the round makes {cells}"
        )
    target = (
        protocol.target_s(duration_class) if duration_class in protocol.duration_classes else None
    )
    if target is not None and target != scope["duration_seconds"]:
        problems.append(
            f"the fixed scope's clips are {scope['duration_seconds']} s; "
            f"{duration_class!r} is {target:g} s"
        )
    if aspect_ratio != scope["aspect_ratio"]:
        problems.append(
            f"the fixed scope's aspect ratio is {scope['aspect_ratio']}; "
            f"the round has {aspect_ratio}"
        )
    tier = scope["resolution_tier"]
    wrong = sorted({t or "(none)" for t in entry_tiers if t != tier})
    if wrong:
        problems.append(
            f"every integration runs at the {tier} resolution tier; entries record "
            f"{', '.join(wrong)}"
        )
    return problems


def variant_problems(
    protocol: Protocol, base: dict[str, Any], variant: dict[str, Any]
) -> list[str]:
    """Duration variants of one core brief may differ only in the duration field."""
    field = protocol.definition["input_package"]["duration_variant_field"]
    keys = (set(base) | set(variant)) - {field}
    differing = sorted(k for k in keys if base.get(k) != variant.get(k))
    if differing:
        return [f"a duration variant may change only {field!r}; it also changes: {differing}"]
    return []


def checklist_problems(checklist: Any) -> list[str]:
    """An atomic requirement checklist: a non-empty list of distinct, single requirements."""
    if not isinstance(checklist, list) or not checklist:
        return ["the requirement checklist must be a non-empty list"]
    problems = []
    ids = []
    for i, item in enumerate(checklist):
        if not isinstance(item, dict) or not item.get("id") or not item.get("requirement"):
            problems.append(f"checklist item {i} needs an 'id' and a 'requirement'")
            continue
        ids.append(item["id"])
    if len(ids) != len(set(ids)):
        problems.append("checklist item ids must be distinct")
    return problems


# ---------------------------------------------------------------------------
# Costs and human actions (protocol: Cost reporting, Human actions)


def cost_problems(
    protocol: Protocol, cost: dict[str, Any], local_compute: dict[str, Any]
) -> list[str]:
    """The five cost values are reported separately; free internal compute is not zero cost."""
    problems = []
    unknown = set(cost) - set(protocol.cost_fields)
    if unknown:
        problems.append(f"unknown cost fields: {sorted(unknown)}")
    for name, value in cost.items():
        try:
            if Decimal(str(value)) < 0:
                problems.append(f"{name} cannot be negative")
        except ArithmeticError:
            problems.append(f"{name} must be a number")
    if local_compute:
        missing = [f for f in protocol.definition["local_compute_fields"] if f not in local_compute]
        if missing:
            problems.append(f"local compute needs: {missing}")
        estimate = cost.get("internal_compute_estimate")
        if estimate is None or Decimal(str(estimate)) <= 0:
            problems.append(
                "local compute was used: internal_compute_estimate must be a positive estimate "
                "(free internal compute is not zero customer cost)"
            )
    return problems


def cost_total(cost: dict[str, Any]) -> Decimal:
    """Spend charged against the budget: the billed cost plus the internal compute estimate."""
    return Decimal(str(cost.get("billed_cost", 0))) + Decimal(
        str(cost.get("internal_compute_estimate", 0))
    )


def engine_controls_problems(protocol: Protocol, controls: dict[str, Any]) -> list[str]:
    """Every common-engine control the protocol lists must be frozen before the round."""
    return [
        f"common-engine control {name!r} is not set"
        for name in protocol.definition.get("common_engine_controls", [])
        if controls.get(name) in (None, "", [], {})
    ]

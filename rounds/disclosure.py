"""What each page and export may show at each stage of a round.

For a protocol with a disclosure schedule (Tovaki ``disclosure``), the schedule decides:
``public_now`` items are always shown; ``withheld_until_scores_are_locked`` items from the
moment scores lock (the task-local anonymous mapping, which is identity, additionally needs
the explicit unlock); ``publish_with_any_result`` items once results exist (scores locked);
``remain_private`` items never. For a protocol without one (AI Duel), hashes are public at
commit, package text when the round opens, and identities at the reveal.
"""

from __future__ import annotations

from typing import Any

from rounds.models import Attempt, Round

LOCKED_STATES = {Round.State.LOCKED, Round.State.REVEALED}
IDENTITY_ITEMS = {"task_local_anonymous_mapping"}


def disclosure_stage(round_: Round, item: str) -> str | None:
    """The schedule stage an item belongs to, or None when the protocol has no schedule."""
    schedule = round_.protocol.disclosure_schedule
    if not schedule:
        return None
    for stage in schedule["stages"]:
        if item in schedule.get(stage, []):
            return stage
    raise KeyError(f"{item!r} is not in {round_.protocol.key}'s disclosure schedule")


def item_visible(round_: Round, item: str) -> bool:
    stage = disclosure_stage(round_, item)
    if stage is None:
        raise ValueError(f"{round_.protocol.key} has no disclosure schedule")
    if stage == "public_now":
        return True
    if stage == "remain_private":
        return False
    if item in IDENTITY_ITEMS:
        return round_.identities_revealed
    return round_.state in LOCKED_STATES


def package_text_visible(round_: Round) -> bool:
    """May the exact prompts (input package text) be shown to the public now?"""
    if round_.protocol.disclosure_schedule:
        return item_visible(round_, "exact_prompts")
    return round_.packages_public


def disclosures(round_: Round) -> dict[str, Any]:
    """Every scheduled item with its value when visible, or ``withheld``/``private``."""
    schedule = round_.protocol.disclosure_schedule
    if not schedule:
        raise ValueError(f"{round_.protocol.key} has no disclosure schedule")
    out: dict[str, Any] = {}
    for stage in schedule["stages"]:
        for item in schedule.get(stage, []):
            if stage == "remain_private":
                out[item] = {"stage": stage, "visible": False, "value": "private"}
            elif item_visible(round_, item):
                out[item] = {"stage": stage, "visible": True, "value": _value(round_, item)}
            else:
                out[item] = {"stage": stage, "visible": False, "value": "withheld"}
    return out


def _value(round_: Round, item: str) -> Any:
    definition = round_.protocol.definition
    if item == "scope_and_fixed_settings":
        return definition.get("fixed_scope")
    if item == "task_lane_coverage":
        return sorted(set(round_.packages.values_list("task_lane", flat=True)))
    if item == "score_dimensions_and_weights":
        return (definition.get("scoring") or {}).get("dimensions")
    if item == "randomization_retry_locking_publication_rules":
        return {
            "controls": definition.get("controls"),
            "retry_policy": {
                k: v
                for k, v in definition["retry_policy"].items()
                if k in ("maximum_retries", "allowed_reasons", "creative_retry_forbidden")
            },
            "publication_gate": definition.get("publication_gate"),
        }
    if item == "protocol_commitment":
        return definition.get("protocol_commitment")
    if item in ("exact_prompts", "exact_prompts_and_settings"):
        value = {p.prompt_key: p.content for p in round_.packages.order_by("prompt_key")}
        if item == "exact_prompts_and_settings":
            return {"prompts": value, "round_controls_sha256": round_.controls_sha256}
        return value
    if item == "model_roster":
        # The roster without the mapping: which systems took part, in name order.
        return sorted(e.identity for e in round_.entries.select_related("system_version__system"))
    if item == "task_local_anonymous_mapping":
        return {
            e.label: e.identity for e in round_.entries.select_related("system_version__system")
        }
    if item == "accepted_sample_hashes":
        return {
            f"{run.entry.label}/{run.package.prompt_key}": run.output_sha256
            for run in _runs(round_)
            if run.accepted_attempt_id
        }
    if item == "technical_failures_and_retries_redacted":
        return [
            {
                "entry": a.run.entry.label,
                "prompt": a.run.package.prompt_key,
                "attempt": a.number,
                "failure_code": a.failure_code,
                "retry_reason": a.retry_reason or None,
            }
            for a in Attempt.objects.filter(run__entry__round=round_, state=Attempt.State.FAILED)
            .select_related("run__entry", "run__package")
            .order_by("run__entry__label", "run__package__prompt_key", "number")
        ]
    if item == "anonymous_raw_reviewer_scores":
        try:
            from juries.selectors import scorecards_frame
        except ImportError:
            return []
        frame = scorecards_frame(round_)
        keep = [c for c in ("juror", "prompt", "system", "dimension", "score") if c in frame]
        return frame[keep].to_dict(orient="records") if len(frame) else []
    if item == "actual_credits_and_limitations":
        from rounds.services import run_cost_summary

        return {
            f"{run.entry.label}/{run.package.prompt_key}": run_cost_summary(run)
            for run in _runs(round_)
        }
    raise KeyError(item)


def _runs(round_: Round):
    from rounds.selectors import runs_of_round

    return runs_of_round(round_).prefetch_related("attempts")

"""Pure protocol rules, table-driven from both protocol definitions (no database)."""

import pytest

from rounds import rules
from rounds.protocols import PROTOCOL_KEYS, Protocol
from rounds.samples import sample_checklist, sample_package

AI_DUEL = Protocol.load("ai-duel-0.1")
TOVAKI = Protocol.load("tovaki-2026-r1")

# (protocol, failure code, retries used, round limit) -> (retry?, protocol reason, final state)
RETRY_TABLE = [
    (AI_DUEL, "provider_error", 0, 2, True, "provider_error", None),
    (AI_DUEL, "infrastructure_failure", 1, 2, True, "infrastructure_failure", None),
    (AI_DUEL, "empty_file", 0, 2, True, "empty_file", None),
    (AI_DUEL, "unplayable_file", 0, 2, True, "unplayable_file", None),
    (AI_DUEL, "missing_stream", 0, 2, True, "missing_stream", None),
    (AI_DUEL, "provider_error", 2, 2, False, "provider_error", "provider_failed"),
    (AI_DUEL, "empty_file", 2, 2, False, "empty_file", "system_failed"),
    (AI_DUEL, "timeout", 0, 2, False, None, "provider_failed"),
    (AI_DUEL, "safety_block", 0, 2, False, None, "policy_blocked"),
    (AI_DUEL, "wrong_duration_or_resolution", 0, 2, False, None, "completed_nonconforming"),
    (AI_DUEL, "provider_error", 0, 0, False, "provider_error", "provider_failed"),
    # Tovaki: one technical retry per cell at most, whatever the round says.
    (TOVAKI, "provider_error", 0, 5, True, "provider_error", None),
    (TOVAKI, "provider_error", 1, 5, False, "provider_error", "provider_failed"),
    (TOVAKI, "timeout", 0, 1, True, "timeout", None),
    (TOVAKI, "unplayable_file", 0, 1, True, "corrupt_or_unplayable_file", None),
    (TOVAKI, "empty_file", 0, 1, True, "corrupt_or_unplayable_file", None),
    (TOVAKI, "missing_stream", 0, 1, True, "missing_required_audio_track", None),
    (
        TOVAKI,
        "wrong_duration_or_resolution",
        0,
        1,
        True,
        "wrong_duration_or_resolution_from_provider",
        None,
    ),
    (TOVAKI, "wrong_duration_or_resolution", 1, 1, False, None, "completed_nonconforming"),
    (TOVAKI, "safety_block", 0, 1, False, None, "policy_blocked"),
]


@pytest.mark.parametrize(
    "protocol,code,used,limit,retry,reason,final", RETRY_TABLE, ids=lambda v: str(v)[:30]
)
def test_retry_decision_table(protocol, code, used, limit, retry, reason, final):
    decision = rules.retry_decision(
        protocol, failure_code=code, retries_used=used, round_retry_limit=limit
    )
    assert decision.retry is retry
    if retry:
        assert decision.protocol_reason == reason
    assert decision.final_state == final


@pytest.mark.parametrize("key", PROTOCOL_KEYS)
def test_every_allowed_retry_reason_is_reachable_and_only_those(key):
    protocol = Protocol.load(key)
    reached = set()
    for code in rules.FAILURE_CODES:
        decision = rules.retry_decision(
            protocol, failure_code=code, retries_used=0, round_retry_limit=1
        )
        if decision.retry:
            reached.add(decision.protocol_reason)
            assert decision.protocol_reason in protocol.retry_reasons
    assert reached == set(protocol.retry_reasons)


@pytest.mark.parametrize("key", PROTOCOL_KEYS)
def test_every_final_state_of_a_failure_is_a_protocol_final_state(key):
    protocol = Protocol.load(key)
    for code in rules.FAILURE_CODES:
        decision = rules.retry_decision(
            protocol, failure_code=code, retries_used=99, round_retry_limit=1
        )
        assert decision.retry is False
        assert decision.final_state in protocol.final_states


def test_deadline_and_budget_end_the_run_before_any_retry():
    deadline = rules.retry_decision(
        AI_DUEL,
        failure_code="provider_error",
        retries_used=0,
        round_retry_limit=3,
        deadline_passed=True,
    )
    assert (deadline.retry, deadline.final_state) == (False, "deadline_exceeded")
    budget = rules.retry_decision(
        AI_DUEL,
        failure_code="provider_error",
        retries_used=0,
        round_retry_limit=3,
        budget_exhausted=True,
    )
    assert (budget.retry, budget.final_state) == (False, "budget_exhausted")


def test_creative_reasons_are_not_failure_codes():
    with pytest.raises(ValueError):
        rules.retry_decision(
            AI_DUEL, failure_code="weak_creative_result", retries_used=0, round_retry_limit=3
        )


@pytest.mark.parametrize(
    "key,duration_class,seconds,conforms",
    [
        ("ai-duel-0.1", "minute_1", 63.0, True),  # 5% of 60 s = 3 s
        ("ai-duel-0.1", "minute_1", 63.01, False),
        ("ai-duel-0.1", "minute_1", 57.0, True),
        ("ai-duel-0.1", "minute_15", 945.0, True),  # 5% of 900 = 45 s < 60 s
        ("ai-duel-0.1", "minute_15", 945.5, False),
        ("ai-duel-0.1", "minute_30", 1860.0, True),  # 5% of 1800 = 90 s, capped at 60 s
        ("ai-duel-0.1", "minute_30", 1860.5, False),
        ("ai-duel-0.1", "minute_120", 7140.0, True),
        ("tovaki-2026-r1", "clip_6s", 6.3, True),
        ("tovaki-2026-r1", "clip_6s", 6.31, False),
    ],
)
def test_duration_tolerance_is_the_smaller_of_five_percent_or_sixty_seconds(
    key, duration_class, seconds, conforms
):
    assert Protocol.load(key).duration_conforms(duration_class, seconds) is conforms


def test_brief_to_film_package_refuses_a_shot_list():
    content = sample_package(0, duration_class="minute_1")
    content["shot_list"] = ["wide", "close-up"]
    problems = rules.package_problems(
        AI_DUEL, prompt_track="brief_to_film", duration_class="minute_1", content=content
    )
    assert any("shot list" in p for p in problems)


@pytest.mark.parametrize("item", AI_DUEL.definition["input_package"]["required_items"])
def test_each_required_item_is_required(item):
    content = sample_package(0, duration_class="minute_1")
    del content[item]
    problems = rules.package_problems(
        AI_DUEL, prompt_track="brief_to_film", duration_class="minute_1", content=content
    )
    assert any(item in p for p in problems)


def test_script_to_film_needs_script_beats_and_bible():
    content = sample_package(0, duration_class="minute_1")
    problems = rules.package_problems(
        AI_DUEL, prompt_track="script_to_film", duration_class="minute_1", content=content
    )
    assert len(problems) == 3
    full = sample_package(0, duration_class="minute_1", prompt_track="script_to_film")
    assert (
        rules.package_problems(
            AI_DUEL, prompt_track="script_to_film", duration_class="minute_1", content=full
        )
        == []
    )


def test_duration_variants_may_differ_only_in_duration():
    base = sample_package(0, duration_class="minute_1")
    variant = {**base, "duration_class": "minute_2"}
    assert rules.variant_problems(AI_DUEL, base, variant) == []
    sneaky = {**variant, "story_outcome": "something else"}
    assert rules.variant_problems(AI_DUEL, base, sneaky)


def test_checklist_must_be_atomic_items_with_distinct_ids():
    assert rules.checklist_problems(sample_checklist(0)) == []
    assert rules.checklist_problems([])
    assert rules.checklist_problems(
        [{"id": "R1", "requirement": "x"}, {"id": "R1", "requirement": "y"}]
    )


def test_free_internal_compute_is_refused_as_zero_cost():
    local = {
        "gpu_model": "L4",
        "gpu_count": 1,
        "gpu_time_s": 120,
        "peak_memory_gb": 20,
        "electricity_method": "metered",
    }
    zero = rules.cost_problems(
        AI_DUEL, {"billed_cost": "0", "internal_compute_estimate": "0"}, local
    )
    assert any("free internal compute" in p for p in zero)
    ok = rules.cost_problems(
        AI_DUEL, {"billed_cost": "0", "internal_compute_estimate": "1.20"}, local
    )
    assert ok == []
    assert rules.cost_problems(AI_DUEL, {"bribes": "1"}, {})


def test_common_engine_controls_must_all_be_frozen():
    missing = rules.engine_controls_problems(AI_DUEL, {"engine_provider": "x"})
    assert len(missing) == len(AI_DUEL.definition["common_engine_controls"]) - 1


@pytest.mark.parametrize(
    "problems,code",
    [
        (["file_empty"], "empty_file"),
        (["not_playable"], "unplayable_file"),
        (["no_video_stream"], "unplayable_file"),
        (["no_audio_stream"], "missing_stream"),
        (["duration_nonconforming"], None),
        ([], None),
    ],
)
def test_technical_failure_from_validation_problems(problems, code):
    assert rules.technical_failure(problems) == code


# ---------------------------------------------------------------------------
# Tovaki's fixed scope: 4 integrations x 6 task lanes = 24 first-take cells of 6 s at 9:16

SCOPE_OK = dict(
    duration_class="clip_6s",
    aspect_ratio="9:16",
    package_lanes=list(TOVAKI.task_lanes),
    entry_tiers=["720p"] * 4,
)


def test_a_round_of_the_fixed_scope_has_no_problem():
    assert rules.fixed_scope_problems(TOVAKI, **SCOPE_OK) == []
    assert TOVAKI.fixed_scope["first_take_cells"] == 4 * len(TOVAKI.task_lanes) == 24


def test_ai_duel_has_no_fixed_scope():
    assert AI_DUEL.fixed_scope is None
    assert rules.fixed_scope_problems(AI_DUEL, **{**SCOPE_OK, "entry_tiers": ["pro"]}) == []


@pytest.mark.parametrize(
    "change, message",
    [
        ({"entry_tiers": ["720p"] * 3}, "exactly 4 model integrations; the round has 3 entries"),
        ({"entry_tiers": ["720p"] * 5}, "exactly 4 model integrations; the round has 5 entries"),
        ({"entry_tiers": ["720p"] * 3 + ["1080p"]}, "720p resolution tier; entries record 1080p"),
        ({"package_lanes": list(TOVAKI.task_lanes)[:5]}, "without a package: bright_surreal"),
        (
            {"package_lanes": [*TOVAKI.task_lanes[:5], TOVAKI.task_lanes[0]]},
            "one package per task lane; repeated: relationship_handoff",
        ),
        ({"package_lanes": [*TOVAKI.task_lanes[:5], "car_chase"]}, "not in tovaki-2026-r1: 'car"),
        ({"package_lanes": [*TOVAKI.task_lanes, ""]}, "every package needs its task lane"),
        ({"aspect_ratio": "16:9"}, "aspect ratio is 9:16; the round has 16:9"),
    ],
)
def test_fixed_scope_problems_name_what_differs(change, message):
    problems = rules.fixed_scope_problems(TOVAKI, **{**SCOPE_OK, **change})
    assert any(message in p for p in problems), problems

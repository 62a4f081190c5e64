"""Protocol definitions as data.

Each JSON file beside this module is one protocol version's frozen definition, named by its
key (``ai-duel-0.1``, ``tovaki-2026-r1``). Code reads rules from here through
:class:`Protocol`; it never keeps a second copy of a rule. Pure Python, no Django.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from duel.canonical import canonical_sha256

DEFINITIONS_DIR = Path(__file__).resolve().parent
PROTOCOL_KEYS: tuple[str, ...] = ("ai-duel-0.1", "tovaki-2026-r1")


class UnknownProtocol(KeyError):
    """Raised for a protocol key that has no definition file."""


class UnknownDurationClass(KeyError):
    """Raised for a duration class the protocol does not define."""


@cache
def _read(key: str) -> str:
    if key not in PROTOCOL_KEYS:
        raise UnknownProtocol(f"unknown protocol {key!r}; known: {', '.join(PROTOCOL_KEYS)}")
    return (DEFINITIONS_DIR / f"{key}.json").read_text(encoding="utf-8")


def load_definition(key: str) -> dict[str, Any]:
    """Return a fresh copy of the definition stored for ``key``."""
    return json.loads(_read(key))


@dataclass(frozen=True)
class Protocol:
    """Read-only view of one protocol definition with the derived rules code needs."""

    definition: dict[str, Any]

    @classmethod
    def load(cls, key: str) -> Protocol:
        return cls(load_definition(key))

    @property
    def key(self) -> str:
        return self.definition["key"]

    @property
    def sha256(self) -> str:
        """SHA-256 over the canonical JSON of the definition."""
        return canonical_sha256(self.definition)

    def section(self, name: str) -> Any:
        """A deep copy of one top-level section, so callers cannot mutate the definition."""
        return copy.deepcopy(self.definition.get(name))

    # Duration classes (protocol: Duration classes)
    @property
    def duration_classes(self) -> dict[str, dict[str, Any]]:
        return self.definition["duration_classes"]

    def duration_class(self, name: str) -> dict[str, Any]:
        try:
            return self.duration_classes[name]
        except KeyError:
            raise UnknownDurationClass(
                f"duration class {name!r} is not defined by {self.key}; "
                f"known: {', '.join(self.duration_classes)}"
            ) from None

    def target_s(self, duration_class: str) -> float:
        return float(self.duration_class(duration_class)["target_s"])

    def tolerance_s(self, duration_class: str) -> float:
        """The smaller of the tolerance fraction of the target or the absolute cap."""
        rule = self.definition["duration_tolerance"]
        return min(self.target_s(duration_class) * rule["fraction"], float(rule["max_s"]))

    def duration_conforms(self, duration_class: str, seconds: float) -> bool:
        return abs(seconds - self.target_s(duration_class)) <= self.tolerance_s(duration_class)

    def evaluation(self, duration_class: str) -> str:
        """``pairwise_vote``, ``jury`` or ``scorecard``."""
        return self.duration_class(duration_class)["evaluation"]

    # Runs (protocol: Run rules, Reliability result)
    @property
    def final_states(self) -> list[str]:
        return list(self.definition["final_states"])

    @property
    def retry_reasons(self) -> list[str]:
        return list(self.definition["retry_policy"]["allowed_reasons"])

    @property
    def maximum_retries(self) -> int | None:
        return self.definition["retry_policy"]["maximum_retries"]

    @property
    def cost_fields(self) -> list[str]:
        return list(self.definition["cost_fields"])

    @property
    def human_action_classes(self) -> dict[str, dict[str, Any]]:
        return self.definition["human_action_classes"]

    def human_action_invalidates(self, action_class: str) -> bool:
        return bool(self.human_action_classes[action_class]["invalidates_autonomous"])

    # Media (protocol: Output requirements, Public segment result)
    @property
    def proxy_recipe(self) -> dict[str, Any]:
        return self.section("proxy_recipe")

    def segment_schedule(self, duration_class: str) -> dict[str, Any] | None:
        return self.definition.get("segment_schedule", {}).get(duration_class)

    # Judging
    @property
    def quality_dimensions(self) -> list[str]:
        return [d["key"] for d in self.definition["quality_dimensions"]]

    @property
    def scoring(self) -> dict[str, Any] | None:
        return self.definition.get("scoring")

    @property
    def voting(self) -> dict[str, Any] | None:
        return self.definition.get("voting")

    @property
    def jury(self) -> dict[str, Any] | None:
        return self.definition.get("jury")

    @property
    def publication_levels(self) -> dict[str, Any] | None:
        return self.definition.get("publication_levels")

    @property
    def publication_gate(self) -> dict[str, Any] | None:
        return self.definition.get("publication_gate")

    @property
    def budget_gate(self) -> dict[str, Any] | None:
        return self.definition.get("budget_gate")

    @property
    def disclosure_schedule(self) -> dict[str, Any] | None:
        return self.definition.get("disclosure_schedule")

    @property
    def fixed_scope(self) -> dict[str, Any] | None:
        """The protocol's fixed design (Tovaki ``fixed_scope``), or None when rounds vary."""
        return self.definition.get("fixed_scope")

    @property
    def task_lanes(self) -> list[str]:
        return list(self.definition.get("task_lanes", []))

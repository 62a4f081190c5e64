"""Conflict-of-interest matching for jurors. Pure Python.

Protocol, "Five-minute and longer evaluation": "Exclude entrant employees, investors,
contractors, and affiliates." The relationships that exclude come from the definition's
``jury.excluded_relationships``; a juror's declared relationship with a party excludes the
juror from a round when the party is an entrant's system name or vendor.

Names are compared after Unicode case folding and whitespace collapsing, so "ACME  Films" and
"acme films" are one party. Matching is deliberately exact beyond that: a looser match would
exclude jurors on a guess, and staff can always exclude by hand with a reason.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def normalize_party(name: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


@dataclass(frozen=True)
class Affiliation:
    party: str
    relationship: str


@dataclass(frozen=True)
class Entrant:
    label: str
    system: str
    vendor: str


@dataclass(frozen=True)
class Conflict:
    """A declared relationship that excludes the juror. ``matched`` says which of the
    entrant's names matched (``system`` or ``vendor``)."""

    party: str
    relationship: str
    entrant_label: str
    matched: str


def find_conflicts(
    affiliations: Iterable[Affiliation],
    entrants: Iterable[Entrant],
    *,
    excluded_relationships: Sequence[str],
) -> list[Conflict]:
    """Every (affiliation, entrant) pair where the relationship excludes and the party is the
    entrant's system or vendor."""
    excluded = set(excluded_relationships)
    names: dict[str, list[tuple[Entrant, str]]] = {}
    for entrant in entrants:
        names.setdefault(normalize_party(entrant.system), []).append((entrant, "system"))
        names.setdefault(normalize_party(entrant.vendor), []).append((entrant, "vendor"))
    conflicts = []
    for affiliation in affiliations:
        if affiliation.relationship not in excluded:
            continue
        for entrant, matched in names.get(normalize_party(affiliation.party), []):
            conflicts.append(
                Conflict(
                    party=affiliation.party,
                    relationship=affiliation.relationship,
                    entrant_label=entrant.label,
                    matched=matched,
                )
            )
    return conflicts

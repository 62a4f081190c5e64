"""Sample input packages and checklists for demos and tests (complete, valid examples)."""

from __future__ import annotations

from typing import Any

STORIES = [
    (
        "A lighthouse keeper repairs the lamp before the storm and guides a lost boat home.",
        [{"name": "Mara", "canon": "the last keeper of the Tern Point light"}],
    ),
    (
        "Two rival bakers discover they share a grandmother's recipe and open a stall together.",
        [{"name": "Ines", "canon": "proud"}, {"name": "Tomas", "canon": "stubborn"}],
    ),
    (
        "A child teaches a retired robot to dance for the town festival.",
        [{"name": "Pip", "canon": "eight years old"}, {"name": "Unit 7", "canon": "rusty"}],
    ),
    (
        "A night-train conductor returns a lost letter to the right passenger before dawn.",
        [{"name": "Ola", "canon": "never late"}],
    ),
    (
        "A beekeeper saves the hive from a cold snap with help from her neighbours.",
        [{"name": "June", "canon": "keeps twelve hives"}],
    ),
    (
        "A street musician finds the owner of a violin left on the tram.",
        [{"name": "Rafi", "canon": "plays every morning at the square"}],
    ),
]


def sample_package(
    index: int,
    *,
    duration_class: str,
    aspect_ratio: str = "16:9",
    prompt_track: str = "brief_to_film",
) -> dict[str, Any]:
    """A complete input package with the seven required items (and script items if needed)."""
    outcome, characters = STORIES[index % len(STORIES)]
    package: dict[str, Any] = {
        "story_outcome": outcome,
        "characters_and_canon": characters,
        "duration_class": duration_class,
        "aspect_ratio": aspect_ratio,
        "language": "en",
        "audio_requirement": "synchronized soundtrack with music; dialogue optional",
        "prohibited_asset_classes": ["uploaded_media", "stock_media", "real_person_likeness"],
    }
    if prompt_track == "script_to_film":
        package["locked_script"] = f"INT. DAY. {outcome}"
        package["beat_sheet"] = ["setup", "complication", "resolution"]
        package["character_bible"] = characters
    return package


def sample_checklist(index: int) -> list[dict[str, str]]:
    """An atomic requirement checklist for a sample package."""
    outcome, characters = STORIES[index % len(STORIES)]
    items = [
        {"id": "R1", "requirement": "The story reaches its stated outcome."},
        {"id": "R2", "requirement": f"{characters[0]['name']} appears and is recognisable."},
        {"id": "R3", "requirement": "The film has a beginning, a development and an ending."},
        {"id": "R4", "requirement": "The soundtrack plays throughout."},
    ]
    return items

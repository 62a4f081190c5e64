"""Juror forms: story questions and the scorecard, built from the frozen plan and protocol."""

from __future__ import annotations

from collections.abc import Sequence

from django import forms

from juries.models import AttentionQuestion, Viewing
from juries.scoring import ScoreScale, text


class AttentionForm(forms.Form):
    """One radio group per story question (answers never enter a score)."""

    def __init__(self, *args, questions: Sequence[AttentionQuestion], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.questions = list(questions)
        for question in self.questions:
            self.fields[f"q_{question.pk}"] = forms.TypedChoiceField(
                label=question.text,
                choices=[(str(i), c) for i, c in enumerate(question.choices)],
                coerce=int,
                widget=forms.RadioSelect,
            )

    def answers(self) -> dict[int, int]:
        return {q.pk: self.cleaned_data[f"q_{q.pk}"] for q in self.questions}


class ScorecardForm(forms.Form):
    """One score per dimension on the frozen scale, with its anchors as help text, and one
    holistic choice against each earlier film of the same prompt."""

    def __init__(
        self,
        *args,
        dimensions: Sequence[tuple[str, str]],
        scale: ScoreScale,
        anchors: dict[str, dict[str, str]],
        partners: Sequence[Viewing],
        partner_labels: dict[str, str],
        this_label: str,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.dimensions = list(dimensions)
        self.partners = list(partners)
        points = [("", "—")] + [(text(p), text(p)) for p in scale.points()]
        for key, label in self.dimensions:
            sheet = anchors.get(key, {})
            help_text = "; ".join(f"{point}: {meaning}" for point, meaning in sheet.items())
            self.fields[f"score_{key}"] = forms.ChoiceField(
                label=label, choices=points, help_text=help_text
            )
        for partner in self.partners:
            earlier = partner_labels[str(partner.public_id)]
            self.fields[f"choice_{partner.public_id}"] = forms.ChoiceField(
                label=f"Overall, which film is better: {earlier} (earlier) or {this_label} "
                "(this film)?",
                choices=[("earlier", f"Film {earlier}"), ("this", f"Film {this_label}")],
                widget=forms.RadioSelect,
            )

    def scores(self) -> dict[str, str]:
        return {key: self.cleaned_data[f"score_{key}"] for key, _ in self.dimensions}

    def choices(self) -> dict[str, str]:
        return {str(p.public_id): self.cleaned_data[f"choice_{p.public_id}"] for p in self.partners}

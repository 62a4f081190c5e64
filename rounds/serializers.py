"""API representations. Identities never appear before a round's reveal."""

from __future__ import annotations

from rest_framework import serializers

from rounds.models import Entry, InputPackage, ProtocolVersion, Round, Run, System, SystemVersion


class ProtocolVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProtocolVersion
        fields = ["key", "name", "version", "sha256", "frozen_at", "definition", "change_log"]


class SystemSerializer(serializers.ModelSerializer):
    class Meta:
        model = System
        fields = ["id", "name", "vendor", "homepage", "operator_relationship"]


class SystemVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = SystemVersion
        fields = [
            "id",
            "system",
            "version",
            "customer_tier",
            "public_configuration",
            "settings",
            "audio_providers",
            "engines",
        ]


class RoundSerializer(serializers.ModelSerializer):
    protocol = serializers.SlugRelatedField(
        source="protocol_version", slug_field="key", queryset=ProtocolVersion.objects.all()
    )

    class Meta:
        model = Round
        fields = [
            "slug",
            "title",
            "protocol",
            "state",
            "is_demo",
            "result_type",
            "benchmark_class",
            "interaction_class",
            "prompt_track",
            "duration_class",
            "aspect_ratio",
            "source_asset_policy",
            "currency",
            "budget_per_system",
            "cost_ceiling",
            "credit_limit_per_system",
            "deadline",
            "retry_limit",
            "human_action_cap",
            "engine_controls",
            "detection_thresholds",
            "voting_settings",
            "controls_sha256",
            "committed_at",
            "opened_at",
            "revealed_at",
        ]
        read_only_fields = ["state", "controls_sha256", "committed_at", "opened_at", "revealed_at"]

    def validate(self, attrs):
        instance = Round(**{**(self._current() or {}), **attrs})
        instance.clean()
        return attrs

    def _current(self):
        if self.instance is None:
            return None
        return {f.name: getattr(self.instance, f.name) for f in Round._meta.concrete_fields}


class InputPackageSerializer(serializers.ModelSerializer):
    """Hashes are public once committed; the package text only once the round opens."""

    content = serializers.SerializerMethodField()
    checklist = serializers.SerializerMethodField()

    class Meta:
        model = InputPackage
        fields = [
            "prompt_key",
            "task_lane",
            "sha256",
            "checklist_sha256",
            "committed_at",
            "content",
            "checklist",
        ]

    def _visible(self, obj: InputPackage) -> bool:
        from rounds.disclosure import package_text_visible

        request = self.context.get("request")
        return package_text_visible(obj.round) or bool(request and request.user.is_staff)

    def get_content(self, obj: InputPackage):
        return obj.content if self._visible(obj) else None

    def get_checklist(self, obj: InputPackage):
        return obj.checklist if self._visible(obj) else None


class EntrySerializer(serializers.ModelSerializer):
    system = serializers.SerializerMethodField()

    class Meta:
        model = Entry
        fields = ["label", "path", "system"]

    def get_system(self, obj: Entry):
        """The identity, only after the round's reveal."""
        if not obj.round.identities_revealed:
            return None
        version = obj.system_version
        return {
            "name": version.system.name,
            "vendor": version.system.vendor,
            "version": version.version,
            "customer_tier": version.customer_tier,
        }


class RunSerializer(serializers.ModelSerializer):
    round = serializers.CharField(source="entry.round.slug")
    entry_label = serializers.CharField(source="entry.label")
    prompt_key = serializers.CharField(source="package.prompt_key")
    wall_time_s = serializers.FloatField(read_only=True)
    attempts = serializers.SerializerMethodField()
    final_reason = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = [
            "public_id",
            "round",
            "entry_label",
            "prompt_key",
            "state",
            "final_state",
            "final_reason",
            "wall_time_s",
            "output_sha256",
            "duration_s",
            "effective_duration_s",
            "problems",
            "exhibition_reason",
            "attempts",
        ]

    def get_final_reason(self, obj: Run):
        """Provider messages can name the system: the code only until the reveal."""
        if obj.entry.round.identities_revealed:
            return obj.final_reason
        return obj.final_reason.split(":", 1)[0] if ":" in obj.final_reason else obj.final_state

    def get_attempts(self, obj: Run):
        return [
            {
                "number": a.number,
                "state": a.state,
                "failure_code": a.failure_code or None,
                "retry_reason": a.retry_reason or None,
                "cost": a.cost,
                "provider_request_id_hash": a.provider_request_id_hash or None,
                "output_sha256": a.output_sha256 or None,
            }
            for a in obj.attempts.all()
        ]

"""A generic HTTP adapter for providers with an asynchronous job API, configured by a dict.

One adapter serves every provider whose API is "POST a job, GET its status, GET its result,
download the asset": a per-provider config names the endpoints, the auth header and the
environment variable holding its token, the polling interval, the timeouts and where the
fields live in the provider's JSON. Standard library only (``urllib``): no new dependency.

Failures are classified for the run rules (protocol: Run rules; Tovaki ``retry_policy``):

=========================================  =================================================
HTTP 5xx, 429, connection refused/reset    ``infrastructure_failure``
HTTP 4xx whose body carries the safety flag ``safety_block``
other HTTP 4xx, a failed job state          ``provider_error``
socket timeout (request or download)        ``timeout``
malformed or incomplete JSON                ``provider_error`` (the message says which)
an asset with no bytes                      ``empty_file``
=========================================  =================================================

Example config (every key but ``base_url`` and ``endpoints`` has a default)::

    {
      "adapter": "http",
      "name": "acme",
      "base_url": "https://api.acme.example/v1",
      "endpoints": {"submit": "POST /jobs", "status": "GET /jobs/{request_id}",
                    "result": "GET /jobs/{request_id}/result"},
      "auth": {"header": "Authorization", "env": "ACME_TOKEN", "scheme": "Bearer"},
      "poll_interval_s": 5, "timeouts": {"request_s": 30, "download_s": 300, "job_s": 3600},
      "request": {"brief": "brief", "settings": "settings", "seed": "seed",
                  "static": {"model": "acme-2"}},
      "fields": {"request_id": "id", "state": "status", "progress": "progress",
                 "asset_url": "output.url", "error_message": "error.message",
                 "safety_flag": {"path": "error.code", "values": ["content_policy"]},
                 "cost": {"billed_cost": "cost.amount"}, "currency": "cost.currency"},
      "states": {"queued": ["queued"], "running": ["running"],
                 "succeeded": ["succeeded"], "failed": ["failed", "cancelled"]},
      "currency": "USD"
    }
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from http.client import HTTPException
from pathlib import Path
from typing import Any

from rounds.gateways._files import ToolFailed, probe, probed_seconds, publishing
from rounds.gateways.base import (
    AdapterConfigurationError,
    CostReport,
    EmptyFile,
    EngineClip,
    FetchedAsset,
    InfrastructureFailure,
    JobState,
    JobStatus,
    ProviderError,
    ProviderFailure,
    ProviderTimeout,
    SafetyBlock,
    Submission,
    SystemProvider,
    UnplayableFile,
    VideoEngine,
    await_job,
)

DEFAULT_STATES: dict[str, list[str]] = {
    "queued": ["queued", "pending", "submitted"],
    "running": ["running", "processing", "in_progress"],
    "succeeded": ["succeeded", "completed", "done", "success"],
    "failed": ["failed", "error", "cancelled", "canceled"],
}
DEFAULT_FIELDS: dict[str, Any] = {
    "request_id": "id",
    "state": "status",
    "progress": "progress",
    "asset_url": "asset_url",
    "error_message": "error.message",
    "safety_flag": "error.safety",
}
_MISSING = object()


def field_at(document: Any, path: str | None, default: Any = _MISSING) -> Any:
    """The value at a dotted ``path`` (``"output.files.0.url"``) in parsed JSON."""
    if not path:
        return default
    value = document
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif (
            isinstance(value, list)
            and part.lstrip("-").isdigit()
            and -len(value) <= int(part) < len(value)
        ):
            value = value[int(part)]
        else:
            return default
    return value


def _set_at(document: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        document = document.setdefault(part, {})
    document[parts[-1]] = value


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str

    @classmethod
    def parse(cls, value: str | Mapping[str, str]) -> Endpoint:
        if isinstance(value, Mapping):
            return cls(str(value.get("method", "GET")).upper(), str(value["path"]))
        method, _, path = str(value).strip().partition(" ")
        if not path:
            method, path = "GET", method
        return cls(method.upper(), path.strip())


@dataclass(frozen=True)
class HttpProviderConfig:
    """A validated provider config (see the module docstring for the dict form)."""

    name: str
    base_url: str
    submit: Endpoint
    status: Endpoint
    result: Endpoint | None = None
    cost_endpoint: Endpoint | None = None
    auth_header: str | None = None
    auth_env: str | None = None
    auth_scheme: str | None = None
    poll_interval_s: float = 5.0
    request_timeout_s: float = 30.0
    download_timeout_s: float = 300.0
    job_timeout_s: float = 3600.0
    request_fields: Mapping[str, str] = field(default_factory=dict)
    static_body: Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)
    states: Mapping[str, JobState] = field(default_factory=dict)
    currency: str = "USD"
    chunk_bytes: int = 1 << 16

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> HttpProviderConfig:
        try:
            endpoints = config["endpoints"]
            base_url = str(config["base_url"]).rstrip("/")
        except KeyError as exc:
            raise AdapterConfigurationError(f"HTTP provider config lacks {exc}") from None
        if urllib.parse.urlsplit(base_url).scheme not in ("http", "https"):
            raise AdapterConfigurationError(f"base_url {base_url!r} must be http(s)")
        auth = dict(config.get("auth") or {})
        if bool(auth.get("header")) != bool(auth.get("env")):
            raise AdapterConfigurationError("auth needs both 'header' and 'env'")
        timeouts = dict(config.get("timeouts") or {})
        states: dict[str, JobState] = {}
        for state, values in (config.get("states") or DEFAULT_STATES).items():
            for value in values:
                states[str(value)] = JobState(state)
        fields = dict(DEFAULT_FIELDS)
        fields.update(config.get("fields") or {})
        request = dict(config.get("request") or {})
        static = request.pop("static", {})
        for key in ("submit", "status"):
            if key not in endpoints:
                raise AdapterConfigurationError(f"HTTP provider config lacks endpoints.{key}")
        return cls(
            name=str(config.get("name", "http")),
            base_url=base_url,
            submit=Endpoint.parse(endpoints["submit"]),
            status=Endpoint.parse(endpoints["status"]),
            result=Endpoint.parse(endpoints["result"]) if endpoints.get("result") else None,
            cost_endpoint=Endpoint.parse(endpoints["cost"]) if endpoints.get("cost") else None,
            auth_header=auth.get("header"),
            auth_env=auth.get("env"),
            auth_scheme=auth.get("scheme"),
            poll_interval_s=float(config.get("poll_interval_s", 5.0)),
            request_timeout_s=float(timeouts.get("request_s", 30.0)),
            download_timeout_s=float(timeouts.get("download_s", 300.0)),
            job_timeout_s=float(timeouts.get("job_s", 3600.0)),
            request_fields=request,
            static_body=dict(static),
            fields=fields,
            states=states,
            currency=str(config.get("currency", "USD")),
            chunk_bytes=int(config.get("chunk_bytes", 1 << 16)),
        )


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc.lower()


class HttpJobClient:
    """The HTTP calls and their classification, shared by the system provider and the engine."""

    def __init__(self, config: HttpProviderConfig) -> None:
        self.config = config
        if config.auth_env and not os.environ.get(config.auth_env):
            raise AdapterConfigurationError(
                f"provider {config.name!r}: the environment variable {config.auth_env} "
                "holding its token is not set"
            )
        # No redirect handler changes: the auth header is added "unredirected", so urllib
        # never forwards the token to wherever a redirect points (a CDN, a presigned URL).
        self._opener = urllib.request.build_opener()

    # -- plumbing

    def url(self, endpoint: Endpoint, request_id: str | None = None) -> str:
        path = endpoint.path
        if request_id is not None:
            path = path.replace("{request_id}", urllib.parse.quote(request_id, safe=""))
        if "://" in path:
            return path
        return f"{self.config.base_url}/{path.lstrip('/')}"

    def _request(
        self, method: str, url: str, body: Any = None, extra_headers: dict | None = None
    ) -> urllib.request.Request:
        data = None
        headers = {"Accept": "application/json", **(extra_headers or {})}
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        cfg = self.config
        if cfg.auth_header and _origin(url) == _origin(cfg.base_url):
            token = os.environ.get(cfg.auth_env or "", "")
            if not token:
                raise AdapterConfigurationError(f"{cfg.auth_env} is not set")
            value = f"{cfg.auth_scheme} {token}" if cfg.auth_scheme else token
            request.add_unredirected_header(cfg.auth_header, value)
        return request

    def _classify_http_error(
        self, exc: urllib.error.HTTPError, url: str, request_id: str | None
    ) -> ProviderFailure:
        try:
            raw = exc.read(1 << 16)
        except (OSError, HTTPException):
            raw = b""
        document: Any = None
        try:
            document = json.loads(raw) if raw else None
        except ValueError:
            document = None
        message = self._error_message(document) or raw[:200].decode("utf-8", "replace").strip()
        detail = {"http_status": exc.code, "url": url}
        text = f"{self.config.name}: HTTP {exc.code} from {url}" + (
            f": {message}" if message else ""
        )
        if exc.code >= 500 or exc.code == 429:
            return InfrastructureFailure(text, provider_request_id=request_id, detail=detail)
        if document is not None and self._safety_flag(document):
            return SafetyBlock(text, provider_request_id=request_id, detail=detail)
        return ProviderError(text, provider_request_id=request_id, detail=detail)

    def _transport_failure(
        self, exc: BaseException, url: str, request_id: str | None
    ) -> ProviderFailure:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        detail = {"url": url, "error": type(reason).__name__}
        if isinstance(reason, TimeoutError):
            return ProviderTimeout(
                f"{self.config.name}: no answer from {url} in time",
                provider_request_id=request_id,
                detail=detail,
            )
        return InfrastructureFailure(
            f"{self.config.name}: cannot reach {url}: {reason}",
            provider_request_id=request_id,
            detail=detail,
        )

    def call_json(
        self,
        endpoint: Endpoint,
        *,
        request_id: str | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One JSON request/response, classified."""
        url = self.url(endpoint, request_id)
        request = self._request(endpoint.method, url, body, headers)
        try:
            with self._opener.open(request, timeout=self.config.request_timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise self._classify_http_error(exc, url, request_id) from exc
        except (urllib.error.URLError, OSError, HTTPException) as exc:
            raise self._transport_failure(exc, url, request_id) from exc
        try:
            return json.loads(raw)
        except ValueError as exc:
            snippet = raw[:120].decode("utf-8", "replace")
            raise ProviderError(
                f"{self.config.name}: malformed JSON from {endpoint.method} {url}: {exc} "
                f"(body starts {snippet!r})",
                provider_request_id=request_id,
                detail={"url": url, "malformed_json": True},
            ) from exc

    def download(self, url: str, dest_path: Path, *, request_id: str) -> tuple[int, str]:
        """Stream ``url`` to ``dest_path`` in chunks (published atomically); size and SHA-256.

        Only network errors are classified as provider failures; a local disk error is ours
        and propagates as the ``OSError`` it is.
        """
        request = self._request("GET", url)
        request.add_header("Accept", "*/*")
        digest = hashlib.sha256()
        size = 0
        with publishing(dest_path) as tmp, open(tmp, "wb") as out:
            try:
                response = self._opener.open(request, timeout=self.config.download_timeout_s)
            except urllib.error.HTTPError as exc:
                raise self._classify_http_error(exc, url, request_id) from exc
            except (urllib.error.URLError, OSError, HTTPException) as exc:
                raise self._transport_failure(exc, url, request_id) from exc
            with response:
                while True:
                    try:
                        chunk = response.read(self.config.chunk_bytes)
                    except (OSError, HTTPException) as exc:
                        raise self._transport_failure(exc, url, request_id) from exc
                    if not chunk:
                        break
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
            if size == 0:
                raise EmptyFile(
                    f"{self.config.name}: the asset at {url} is empty",
                    provider_request_id=request_id,
                    detail={"url": url},
                )
        return size, digest.hexdigest()

    # -- field mapping

    def _error_message(self, document: Any) -> str | None:
        value = field_at(document, self.config.fields.get("error_message"), None)
        if value is None and isinstance(document, Mapping):
            value = document.get("error") if isinstance(document.get("error"), str) else None
        return None if value is None else str(value)

    def _safety_flag(self, document: Any) -> bool:
        spec = self.config.fields.get("safety_flag")
        if isinstance(spec, Mapping):
            value = field_at(document, spec.get("path"), None)
            return value is not None and value in spec.get("values", [])
        return bool(field_at(document, spec, False))

    def required(self, document: Any, name: str, *, request_id: str | None) -> Any:
        path = self.config.fields.get(name)
        value = field_at(document, path, _MISSING)
        if value is _MISSING or value in (None, ""):
            raise ProviderError(
                f"{self.config.name}: the response lacks {name} (field {path!r})",
                provider_request_id=request_id,
                detail={"missing_field": name},
            )
        return value

    def cost_from(self, document: Any) -> CostReport:
        mapping = self.config.fields.get("cost") or {}
        amounts: dict[str, Decimal] = {}
        for name, path in mapping.items():
            value = field_at(document, path, None)
            if value is None:
                continue
            try:
                amounts[name] = Decimal(str(value))
            except InvalidOperation:
                raise ProviderError(
                    f"{self.config.name}: cost field {path!r} is not a number: {value!r}"
                ) from None
        currency = field_at(document, self.config.fields.get("currency"), None)
        return CostReport(currency=str(currency or self.config.currency), amounts=amounts)

    def status_from(self, document: Any, *, request_id: str) -> JobStatus:
        raw_state = self.required(document, "state", request_id=request_id)
        state = self.config.states.get(str(raw_state))
        if state is None:
            raise ProviderError(
                f"{self.config.name}: unknown job state {raw_state!r}",
                provider_request_id=request_id,
            )
        progress = field_at(document, self.config.fields.get("progress"), None)
        try:
            progress = None if progress is None else float(progress)
        except (TypeError, ValueError):
            progress = None
        error = None
        if state == JobState.FAILED:
            message = self._error_message(document) or "the provider reported the job failed"
            cls = SafetyBlock if self._safety_flag(document) else ProviderError
            error = cls(
                f"{self.config.name}: {message}",
                provider_request_id=request_id,
                cost=self.cost_from(document),
                detail={"state": str(raw_state)},
            )
        return JobStatus(state=state, progress=progress, error=error)

    def submit_body(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        body = json.loads(json.dumps(dict(self.config.static_body)))
        for name, value in arguments.items():
            _set_at(body, self.config.request_fields.get(name, name), value)
        return body

    def result_document(self, request_id: str) -> Any:
        endpoint = self.config.result or self.config.status
        return self.call_json(endpoint, request_id=request_id)


class HttpSystemProvider(SystemProvider):
    """A complete system reached over its HTTP job API (``{"adapter": "http", ...}``)."""

    def __init__(self, config: Mapping[str, Any] | HttpProviderConfig) -> None:
        if not isinstance(config, HttpProviderConfig):
            config = HttpProviderConfig.from_config(config)
        self.config = config
        self.client = HttpJobClient(config)

    def submit(
        self,
        brief: dict[str, Any],
        settings: dict[str, Any],
        *,
        seed: int,
        idempotency_key: str | None = None,
    ) -> Submission:
        body = self.client.submit_body({"brief": brief, "settings": settings, "seed": seed})
        return self._submit(body, idempotency_key=idempotency_key)

    def _submit(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> Submission:
        """POST the job; ``idempotency_key`` goes in the ``Idempotency-Key`` header."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        document = self.client.call_json(self.config.submit, body=body, headers=headers)
        request_id = str(self.client.required(document, "request_id", request_id=None))
        provider_request_id = field_at(
            document, self.config.fields.get("provider_request_id"), request_id
        )
        return Submission(request_id=request_id, provider_request_id=str(provider_request_id))

    def poll(self, request_id: str) -> JobStatus:
        document = self.client.call_json(self.config.status, request_id=request_id)
        return self.client.status_from(document, request_id=request_id)

    def fetch(self, request_id: str, dest_path: Path) -> FetchedAsset:
        return self._fetch(request_id, Path(dest_path))[0]

    def _fetch(self, request_id: str, dest_path: Path) -> tuple[FetchedAsset, Any]:
        document = self.client.result_document(request_id)
        if self.config.result is None:
            status = self.client.status_from(document, request_id=request_id)
            if status.error is not None:
                raise status.error
        asset = str(self.client.required(document, "asset_url", request_id=request_id))
        url = urllib.parse.urljoin(self.config.base_url + "/", asset)
        cost = self.client.cost_from(document)
        try:
            size, sha256 = self.client.download(url, dest_path, request_id=request_id)
        except ProviderFailure as exc:
            exc.cost = exc.cost or cost
            raise
        provider_request_id = field_at(
            document, self.config.fields.get("provider_request_id"), request_id
        )
        fetched = FetchedAsset(
            path=dest_path,
            size_bytes=size,
            cost=cost,
            provider_request_id=str(provider_request_id),
            details={"sha256": sha256, "asset_url": url},
        )
        return fetched, document

    def cost(self, request_id: str) -> CostReport:
        endpoint = self.config.cost_endpoint or self.config.result or self.config.status
        return self.client.cost_from(self.client.call_json(endpoint, request_id=request_id))


class HttpVideoEngine(VideoEngine):
    """The common video engine reached over an HTTP job API: submit, wait, download.

    The submit body carries ``prompt``, ``params`` and ``seed`` (renamed by ``request``);
    ``fields.seconds`` names the generated duration, otherwise the clip is probed.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | HttpProviderConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.provider = HttpSystemProvider(config)
        self.config = self.provider.config
        self._clock = clock
        self._sleep = sleep

    def generate(
        self, prompt: str, params: dict[str, Any], *, seed: int, dest_path: Path
    ) -> EngineClip:
        client = self.provider.client
        body = client.submit_body({"prompt": prompt, "params": params, "seed": seed})
        submission = self.provider._submit(body)
        await_job(
            self.provider,
            submission.request_id,
            timeout_s=self.config.job_timeout_s,
            poll_interval_s=self.config.poll_interval_s,
            clock=self._clock,
            sleep=self._sleep,
        )
        asset, document = self.provider._fetch(submission.request_id, Path(dest_path))
        document_seconds = field_at(document, self.config.fields.get("seconds"), None)
        if document_seconds is not None:
            seconds = float(document_seconds)
        else:
            try:
                seconds = probed_seconds(probe(asset.path))
            except ToolFailed as exc:
                raise UnplayableFile(
                    f"{self.config.name}: the clip cannot be probed: {exc.stderr_tail}",
                    provider_request_id=asset.provider_request_id,
                    cost=asset.cost,
                ) from exc
        return EngineClip(
            path=asset.path,
            seconds=seconds,
            cost=asset.cost,
            provider_request_id=asset.provider_request_id,
            details=dict(asset.details),
        )

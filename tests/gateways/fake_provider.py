"""A local HTTP server that behaves like a video provider's asynchronous job API.

Runs ``http.server`` in a thread on 127.0.0.1 and an ephemeral port. Each test picks the
behaviour it needs by setting :attr:`FakeProvider.mode` (and a few knobs), then drives the
HTTP adapter against :attr:`FakeProvider.base_url`. Every request is recorded, so tests can
assert what the adapter sent (auth headers, bodies) and what it did not.

API (all JSON except the asset):

* ``POST /v1/jobs`` -> ``{"id": ..., "status": "queued"}``; a repeated ``Idempotency-Key``
  header answers with the job that key created
* ``GET /v1/jobs/{id}`` -> ``{"id", "status", "progress", "error"?, "cost"?}``; ``queued`` on
  the first poll, ``running`` until ``polls_until_done`` polls, then ``succeeded``
* ``GET /v1/jobs/{id}/result`` -> ``{"output": {"url", "duration"}, "cost": {...}}``
* ``GET /v1/assets/{id}.mp4`` -> the asset bytes (no auth, like a CDN)

Modes: ``ok``, ``submit_5xx``, ``status_5xx``, ``rate_limited``, ``submit_timeout``,
``status_timeout``, ``download_timeout``, ``malformed_json``, ``malformed_status``,
``missing_id``, ``safety_submit``, ``bad_request``, ``job_fails``, ``job_safety``,
``empty_asset``, ``asset_elsewhere`` (the asset URL points at ``localhost`` instead of
``127.0.0.1``: another origin, so the token must not follow it).
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = (
    "ok",
    "submit_5xx",
    "status_5xx",
    "rate_limited",
    "submit_timeout",
    "status_timeout",
    "download_timeout",
    "malformed_json",
    "malformed_status",
    "missing_id",
    "safety_submit",
    "bad_request",
    "job_fails",
    "job_safety",
    "empty_asset",
    "asset_elsewhere",
)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeJob:
    id: str
    body: Any
    polls: int = 0


@dataclass
class FakeProvider:
    """The server and its behaviour; use as a context manager."""

    token: str = "fake-token"
    mode: str = "ok"
    polls_until_done: int = 2
    asset: bytes = b"\x00\x00\x00\x18ftypmp42" + b"fake video payload " * 64
    asset_duration: float | None = 6.0
    delay_s: float = 2.0
    cost: dict[str, Any] = field(
        default_factory=lambda: {"amount": "1.25", "list": "1.50", "currency": "USD"}
    )
    requests: list[RecordedRequest] = field(default_factory=list)
    jobs: dict[str, FakeJob] = field(default_factory=dict)
    # Idempotency-Key -> job id: a POST with a key seen before answers with that job.
    keys: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def __enter__(self) -> FakeProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                provider._handle(self, "GET")

            def do_POST(self) -> None:
                provider._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopping.set()  # wakes handlers sleeping to simulate timeouts
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def config(self, **overrides: Any) -> dict[str, Any]:
        """An HTTP adapter config for this server (token read from ``env``)."""
        config: dict[str, Any] = {
            "adapter": "http",
            "name": "fake",
            "base_url": self.base_url,
            "endpoints": {
                "submit": "POST /jobs",
                "status": "GET /jobs/{request_id}",
                "result": "GET /jobs/{request_id}/result",
            },
            "auth": {"header": "Authorization", "env": "FAKE_PROVIDER_TOKEN", "scheme": "Bearer"},
            "poll_interval_s": 0.01,
            "timeouts": {"request_s": 2.0, "download_s": 2.0, "job_s": 5.0},
            "request": {"static": {"model": "fake-1"}},
            "fields": {
                "request_id": "id",
                "state": "status",
                "progress": "progress",
                "asset_url": "output.url",
                "seconds": "output.duration",
                "error_message": "error.message",
                "safety_flag": {"path": "error.code", "values": ["content_policy"]},
                "cost": {"billed_cost": "cost.amount", "public_list_cost": "cost.list"},
                "currency": "cost.currency",
            },
            "states": {
                "queued": ["queued"],
                "running": ["running"],
                "succeeded": ["succeeded"],
                "failed": ["failed"],
            },
        }
        config.update(overrides)
        return config

    def paths(self, method: str | None = None) -> list[str]:
        return [r.path for r in self.requests if method is None or r.method == method]

    # -- behaviour

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def _stall(self) -> None:
        self._stopping.wait(self.delay_s)

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        path = handler.path
        with self._lock:
            self.requests.append(RecordedRequest(method, path, dict(handler.headers.items()), body))
        mode = self.mode

        if path.startswith("/v1/assets/"):
            return self._asset(handler, mode)
        if handler.headers.get("Authorization") != f"Bearer {self.token}":
            return self._send(handler, 401, {"error": {"message": "invalid token"}})

        if method == "POST" and path == "/v1/jobs":
            if mode == "submit_5xx":
                return self._send(handler, 503, {"error": {"message": "upstream unavailable"}})
            if mode == "rate_limited":
                return self._send(handler, 429, {"error": {"message": "slow down"}})
            if mode == "submit_timeout":
                self._stall()
                return self._send(handler, 200, {"id": "late", "status": "queued"})
            if mode == "malformed_json":
                return self._send(handler, 200, b'{"id": "x", "status": ')
            if mode == "missing_id":
                return self._send(handler, 200, {"status": "queued"})
            if mode == "safety_submit":
                return self._send(
                    handler,
                    400,
                    {"error": {"message": "prompt violates policy", "code": "content_policy"}},
                )
            if mode == "bad_request":
                return self._send(
                    handler, 400, {"error": {"message": "unknown field 'x'", "code": "invalid"}}
                )
            key = handler.headers.get("Idempotency-Key")
            with self._lock:
                job = self.jobs.get(self.keys.get(key, "")) if key else None
                if job is None:
                    job = FakeJob(id=uuid.uuid4().hex[:12], body=body)
                    self.jobs[job.id] = job
                    if key:
                        self.keys[key] = job.id
            return self._send(handler, 202, {"id": job.id, "status": "queued"})

        parts = path.strip("/").split("/")  # v1 jobs <id> [result]
        if method == "GET" and len(parts) in (3, 4) and parts[:2] == ["v1", "jobs"]:
            job = self.jobs.get(parts[2])
            if job is None:
                return self._send(handler, 404, {"error": {"message": "no such job"}})
            if len(parts) == 4 and parts[3] == "result":
                return self._result(handler, job, mode)
            return self._status(handler, job, mode)
        return self._send(handler, 404, {"error": {"message": f"no route {method} {path}"}})

    def _status(self, handler: BaseHTTPRequestHandler, job: FakeJob, mode: str) -> None:
        if mode == "status_5xx":
            return self._send(handler, 502, b"<html>bad gateway</html>")
        if mode == "status_timeout":
            self._stall()
        if mode == "malformed_status":
            return self._send(handler, 200, b"not json at all")
        with self._lock:
            job.polls += 1
            polls = job.polls
        document: dict[str, Any] = {"id": job.id, "progress": min(1.0, polls / 3)}
        if polls == 1:
            document["status"] = "queued"
        elif polls < self.polls_until_done:
            document["status"] = "running"
        elif mode == "job_fails":
            document.update(status="failed", error={"message": "render node crashed"})
            document["cost"] = {"amount": "0", "currency": "USD"}
        elif mode == "job_safety":
            document.update(
                status="failed",
                error={"message": "output flagged by moderation", "code": "content_policy"},
            )
        else:
            document.update(status="succeeded", cost=self.cost)
        return self._send(handler, 200, document)

    def _result(self, handler: BaseHTTPRequestHandler, job: FakeJob, mode: str) -> None:
        host = "localhost" if mode == "asset_elsewhere" else "127.0.0.1"
        url = f"http://{host}:{self.port}/v1/assets/{job.id}.mp4"
        output: dict[str, Any] = {"url": url}
        if self.asset_duration is not None:
            output["duration"] = self.asset_duration
        return self._send(handler, 200, {"id": job.id, "output": output, "cost": self.cost})

    def _asset(self, handler: BaseHTTPRequestHandler, mode: str) -> None:
        payload = b"" if mode == "empty_asset" else self.asset
        handler.send_response(200)
        handler.send_header("Content-Type", "video/mp4")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if mode == "download_timeout":
            handler.wfile.write(payload[:10])
            handler.wfile.flush()
            self._stall()
            return
        view = memoryview(payload)
        for start in range(0, len(payload), 1 << 16):
            handler.wfile.write(view[start : start + (1 << 16)])

"""An entrant's orchestration system in the Common Visual Engine class, and its gateway client.

:class:`GatewayClient` calls the platform's common-engine gateway over HTTP with the entry's
token, exactly as an outside entrant's system would. :class:`ReferenceOrchestratorProvider`
wraps :func:`rounds.gateways.reference.reference_orchestrate` behind the ``SystemProvider``
interface, so the platform operates a common-engine entrant like any other system: it submits
the committed brief, polls, and fetches the assembled film together with the list of engine
requests the film used (the rest are discarded seconds).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from rounds.gateways.base import (
    AdapterConfigurationError,
    CostReport,
    EngineClip,
    FetchedAsset,
    InfrastructureFailure,
    JobState,
    JobStatus,
    ProviderError,
    ProviderTimeout,
    SafetyBlock,
    Submission,
    SystemProvider,
)
from rounds.gateways.reference import OrchestrationFailed, reference_orchestrate
from rounds.protocols import Protocol


@dataclass
class GatewayClient:
    """``VideoEngine.generate``-shaped client of the common-engine gateway."""

    base_url: str
    token: str
    run: str
    model: str
    api_version: str
    poll_interval_s: float = 0.2
    timeout_s: float = 600.0
    request_timeout_s: float = 60.0
    sleep: Any = field(default=time.sleep, repr=False)

    def _call(self, method: str, path: str, body: dict | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base_url.rstrip("/") + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.request_timeout_s) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            try:
                payload = json.loads(error.read() or b"null")
            except ValueError:
                payload = None
            return error.code, payload
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            raise InfrastructureFailure(f"the gateway did not answer: {error}") from error

    def generate(
        self, prompt: str, params: dict[str, Any], *, seed: int, dest_path: Path
    ) -> EngineClip:
        body = {
            "model": self.model,
            "api_version": self.api_version,
            "prompt": prompt,
            "params": dict(params),
            "inputs": [{"type": "text"}],
            "run": self.run,
        }
        deadline = time.monotonic() + self.timeout_s
        while True:
            status, payload = self._call("POST", "/api/v1/engine/requests", body)
            if status == 429 and time.monotonic() < deadline:
                # Rate or concurrency limit: wait our turn, as the gateway asks.
                self.sleep(max(self.poll_interval_s, 0.5))
                continue
            break
        if status >= 500:
            raise InfrastructureFailure(f"gateway error {status}: {payload}")
        if status != 202:
            message = (payload or {}).get("error", f"HTTP {status}")
            raise ProviderError(
                f"the gateway refused the request: {message}",
                detail={"gateway_code": (payload or {}).get("code")},
            )
        request_id = payload["id"]
        while payload["state"] in ("queued", "running"):
            if time.monotonic() > deadline:
                raise ProviderTimeout(f"engine request {request_id} did not finish in time")
            self.sleep(self.poll_interval_s)
            status, payload = self._call("GET", f"/api/v1/engine/requests/{request_id}")
            if status != 200:
                raise InfrastructureFailure(f"gateway status {status} for {request_id}")
        if payload["state"] == "safety_blocked":
            raise SafetyBlock(
                payload.get("error") or "safety block", provider_request_id=request_id
            )
        if payload["state"] != "succeeded":
            raise ProviderError(
                payload.get("error") or "engine failed", provider_request_id=request_id
            )
        self._download(f"/api/v1/engine/requests/{request_id}/output", Path(dest_path))
        return EngineClip(
            path=Path(dest_path),
            seconds=float(payload["generated_seconds"]),
            cost=CostReport(
                currency="credits", amounts={"billed_cost": Decimal(payload["charged_credits"])}
            ),
            provider_request_id=request_id,
        )

    def _download(self, path: str, dest: Path) -> None:
        request = urllib.request.Request(
            self.base_url.rstrip("/") + path, headers={"Authorization": f"Bearer {self.token}"}
        )
        partial = dest.with_name(dest.name + ".part")
        with urllib.request.urlopen(request, timeout=self.request_timeout_s) as response:
            with open(partial, "wb") as handle:
                shutil.copyfileobj(response, handle, 1 << 20)
        os.replace(partial, dest)


_THREADS: dict[str, threading.Thread] = {}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class ReferenceOrchestratorProvider(SystemProvider):
    """A reference entrant system that makes its film by calling the gateway.

    Jobs run in a thread of the operating worker and record their state on disk. A job whose
    process died is reported as an infrastructure failure (a technical retry reason), never as
    still running.
    """

    state_dir: Path
    protocol: str
    gateway_url: str
    token: str
    model: str
    api_version: str
    plan: dict[str, Any] = field(default_factory=dict)
    system: str = "reference-orchestrator"

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ReferenceOrchestratorProvider:
        missing = [k for k in ("token", "model", "api_version", "gateway_url") if not config.get(k)]
        if missing:
            raise AdapterConfigurationError(f"reference orchestrator needs: {missing}")
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in config.items() if k in known})

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir) / "orchestrator"

    def _job(self, request_id: str) -> Path:
        return self.state_dir / "jobs" / f"{request_id}.json"

    def _write(self, request_id: str, record: dict[str, Any]) -> None:
        path = self._job(request_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)

    def _claim(self, request_id: str, record: dict[str, Any]) -> bool:
        """Create the job record only if the job does not exist yet (a hard link is atomic)."""
        path = self._job(request_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".claim-{uuid.uuid4().hex}")
        tmp.write_text(json.dumps(record))
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            tmp.unlink()
        return True

    def _read(self, request_id: str) -> dict[str, Any]:
        try:
            return json.loads(self._job(request_id).read_text())
        except FileNotFoundError:
            raise ProviderError(f"unknown job {request_id}") from None

    def submit(
        self,
        brief: dict[str, Any],
        settings: dict[str, Any],
        *,
        seed: int,
        idempotency_key: str | None = None,
    ) -> Submission:
        """Start the job in a thread; a key seen before answers with its job, not a new one."""
        run = settings.get("duel_run")
        if not run:
            raise ProviderError("the platform did not say which run this job is for")
        if idempotency_key:
            request_id = f"orch-{hashlib.sha256(idempotency_key.encode()).hexdigest()[:20]}"
        else:
            request_id = f"orch-{uuid.uuid4().hex[:20]}"
        if not self._claim(request_id, {"state": "running", "pid": os.getpid()}):
            return Submission(request_id=request_id, provider_request_id=request_id)
        film = self.state_dir / "films" / f"{request_id}.mp4"
        film.parent.mkdir(parents=True, exist_ok=True)
        client = GatewayClient(
            base_url=self.gateway_url,
            token=self.token,
            run=run,
            model=self.model,
            api_version=self.api_version,
        )

        def work() -> None:
            try:
                result = reference_orchestrate(
                    brief,
                    client.generate,
                    self.plan,
                    protocol=Protocol.load(self.protocol),
                    seed=seed,
                    dest_path=film,
                    work_dir=self.state_dir / "work" / request_id,
                )
                self._write(request_id, {"state": "succeeded", "result": result.to_json()})
            except OrchestrationFailed as failed:
                self._write(
                    request_id,
                    {"state": "failed", "error": str(failed), "failures": failed.failures},
                )
            except Exception as error:  # noqa: BLE001 - the job records why it died
                self._write(request_id, {"state": "crashed", "error": repr(error)})
            finally:
                shutil.rmtree(self.state_dir / "work" / request_id, ignore_errors=True)

        thread = threading.Thread(target=work, name=request_id, daemon=True)
        _THREADS[request_id] = thread
        thread.start()
        return Submission(request_id=request_id, provider_request_id=request_id)

    def poll(self, request_id: str) -> JobStatus:
        record = self._read(request_id)
        state = record["state"]
        if state == "running":
            thread = _THREADS.get(request_id)
            alive = thread.is_alive() if thread else _pid_alive(record["pid"])
            if thread is None and record["pid"] == os.getpid():
                alive = False
            if alive:
                return JobStatus(JobState.RUNNING)
            return JobStatus(
                JobState.FAILED,
                error=InfrastructureFailure(
                    "the orchestrator process died mid-job", provider_request_id=request_id
                ),
            )
        if state == "succeeded":
            return JobStatus(JobState.SUCCEEDED, progress=1.0)
        if state == "crashed":
            error = InfrastructureFailure(record["error"], provider_request_id=request_id)
        else:
            codes = sorted(
                {
                    f["detail"]["gateway_code"]
                    for f in record.get("failures", [])
                    if (f.get("detail") or {}).get("gateway_code")
                }
            )
            error = ProviderError(
                record.get("error", "failed"),
                provider_request_id=request_id,
                detail={"gateway_codes": codes},
            )
        return JobStatus(JobState.FAILED, error=error)

    def fetch(self, request_id: str, dest_path: Path) -> FetchedAsset:
        record = self._read(request_id)
        if record["state"] != "succeeded":
            raise ProviderError(f"job {request_id} is {record['state']}")
        film = self.state_dir / "films" / f"{request_id}.mp4"
        shutil.copyfile(film, dest_path)
        result = record["result"]
        return FetchedAsset(
            path=Path(dest_path),
            size_bytes=Path(dest_path).stat().st_size,
            cost=self.cost(request_id),
            provider_request_id=request_id,
            details={
                "engine_requests_used": [c["provider_request_id"] for c in result["used"]],
                "engine_requests_discarded": [
                    c["provider_request_id"] for c in result["discarded"]
                ],
                "generated_seconds": result["generated_seconds"],
                "discarded_seconds": result["discarded_seconds"],
            },
        )

    def cost(self, request_id: str) -> CostReport:
        """The engine credits the film consumed (charged at the gateway)."""
        record = self._read(request_id)
        engine_cost = (record.get("result") or {}).get("engine_cost") or {}
        amounts = {k: Decimal(str(v)) for k, v in (engine_cost.get("amounts") or {}).items()}
        return CostReport(currency=engine_cost.get("currency", "credits"), amounts=amounts)

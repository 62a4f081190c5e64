"""Celery tasks of rounds: thin; receive ids, call services."""

from __future__ import annotations

from celery import shared_task

from rounds.engine_queue import drain, queue_for


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def engine_dispatch(round_id: int) -> int:
    """Drain the round's fair engine queue within its engine slots."""
    from rounds.engine_gateway import EngineSurface, engine_request_execute
    from rounds.models import Round

    round_ = Round.objects.get(pk=round_id)
    return drain(queue_for(round_id), EngineSurface.of(round_).engine_slots, engine_request_execute)


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=None,
)
def run_operate(self, run_id: int) -> str:
    """Operate one run to its end (resumable: see rounds.runner)."""
    from rounds.models import Run
    from rounds.runner import operate

    if self.request.id:
        Run.objects.filter(pk=run_id).update(task_id=self.request.id)
    return operate(run_id).final_state


@shared_task(ignore_result=True)
def reap_stale_runs(older_than_s: float = 600.0) -> list[int]:
    """Re-enqueue runs whose worker died (no sign of life for ``older_than_s``)."""
    from rounds.runner import stale_runs

    stale = stale_runs(older_than_s)
    for run_id in stale:
        run_operate.delay(run_id)
    return stale


@shared_task(ignore_result=True)
def reap_stale_engine_requests() -> dict[str, list[int]]:
    """Fail engine requests a dead worker left running; queue again those it dropped."""
    from rounds.engine_gateway import engine_requests_reap

    reaped = engine_requests_reap()
    return {"failed": reaped.failed, "requeued": reaped.requeued}

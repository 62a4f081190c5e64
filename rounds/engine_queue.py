"""A fair queue for the common engine, backed by Redis.

Each entrant has its own FIFO list; the dispatcher picks the next entrant uniformly at random
among those with pending requests (not the next request), so an entrant that floods the
gateway does not get the engine more often or at better times than one that sends a request
now and then (protocol: "Randomly interleave requests from each entrant"). A counting
semaphore bounds how many requests run on the engine at once.

Without Redis (the embedded default, with eager tasks) a process-local queue with the same
interface stands in: there is only one process, and each request is dispatched as it arrives.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import deque
from typing import Protocol as TypingProtocol

from django.conf import settings

_POP = """
local entrant = redis.call('SRANDMEMBER', KEYS[1])
if not entrant then return nil end
local list = ARGV[1] .. entrant
local item = redis.call('LPOP', list)
if redis.call('LLEN', list) == 0 then redis.call('SREM', KEYS[1], entrant) end
return item
"""

# Engine slots are leases: a sorted set of holder tokens scored by when they were taken.
# Expired leases (their worker died without releasing) are dropped before counting, so a dead
# worker's slot comes back after one lease even while other workers keep the round busy.
_ACQUIRE = """
local now = redis.call('TIME')
local now_s = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_s - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now_s, ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
return 1
"""


class EngineQueue(TypingProtocol):
    def push(self, entrant: int, request: int) -> None: ...
    def pop(self) -> int | None: ...
    def pending(self) -> int: ...
    def holds(self, entrant: int, request: int) -> bool: ...
    def acquire_slot(self, limit: int) -> str | None: ...
    def release_slot(self, lease: str) -> None: ...


class RedisFairQueue:
    """The production queue: per-entrant lists plus a set of entrants with pending work."""

    def __init__(self, client, namespace: int | str, *, lease_s: float = 3600.0) -> None:
        self.client = client
        self.prefix = f"duel:engine:{namespace}:"
        self.active = self.prefix + "active"
        self.slots = self.prefix + "leases"
        self.lease_s = float(lease_s)
        self._pop = client.register_script(_POP)
        self._acquire = client.register_script(_ACQUIRE)

    def push(self, entrant: int, request: int) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.rpush(f"{self.prefix}q:{entrant}", request)
        pipe.sadd(self.active, entrant)
        pipe.execute()

    def pop(self) -> int | None:
        item = self._pop(keys=[self.active], args=[f"{self.prefix}q:"])
        return None if item is None else int(item)

    def pending(self) -> int:
        return sum(
            self.client.llen(f"{self.prefix}q:{e.decode()}")
            for e in self.client.smembers(self.active)
        )

    def holds(self, entrant: int, request: int) -> bool:
        return self.client.lpos(f"{self.prefix}q:{entrant}", request) is not None

    def acquire_slot(self, limit: int) -> str | None:
        """A lease on one of ``limit`` engine slots, or None when all are held."""
        lease = uuid.uuid4().hex
        taken = self._acquire(keys=[self.slots], args=[limit, self.lease_s, lease])
        return lease if taken else None

    def release_slot(self, lease: str) -> None:
        self.client.zrem(self.slots, lease)

    def clear(self) -> None:
        for key in self.client.scan_iter(self.prefix + "*"):
            self.client.delete(key)


class LocalFairQueue:
    """The embedded default's stand-in: the same rule in one process."""

    _queues: dict[int, dict[int, deque[int]]] = {}
    _leases: dict[int, dict[str, float]] = {}
    _lock = threading.Lock()

    def __init__(
        self,
        round_id: int,
        rng: random.Random | None = None,
        *,
        lease_s: float = 3600.0,
        clock=time.monotonic,
    ) -> None:
        self.round_id = round_id
        self.rng = rng or random.SystemRandom()
        self.lease_s = float(lease_s)
        self.clock = clock

    def push(self, entrant: int, request: int) -> None:
        with self._lock:
            self._queues.setdefault(self.round_id, {}).setdefault(entrant, deque()).append(request)

    def pop(self) -> int | None:
        with self._lock:
            queues = self._queues.get(self.round_id, {})
            active = [e for e, q in queues.items() if q]
            if not active:
                return None
            return queues[self.rng.choice(active)].popleft()

    def pending(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.get(self.round_id, {}).values())

    def holds(self, entrant: int, request: int) -> bool:
        with self._lock:
            return request in self._queues.get(self.round_id, {}).get(entrant, ())

    def acquire_slot(self, limit: int) -> str | None:
        now = self.clock()
        with self._lock:
            leases = self._leases.setdefault(self.round_id, {})
            for lease, taken in list(leases.items()):
                if now - taken > self.lease_s:
                    del leases[lease]
            if len(leases) >= limit:
                return None
            lease = uuid.uuid4().hex
            leases[lease] = now
            return lease

    def release_slot(self, lease: str) -> None:
        with self._lock:
            self._leases.get(self.round_id, {}).pop(lease, None)


def queue_for(round_id: int) -> EngineQueue:
    """The round's queue: Redis when configured, the local stand-in otherwise."""
    if settings.REDIS_URL:
        import redis
        from django.db import connection

        # Keyed by database too, so two deployments (or test databases) sharing a Redis never
        # mix their queues.
        namespace = f"{connection.settings_dict['NAME']}:{round_id}"
        return RedisFairQueue(
            redis.Redis.from_url(settings.REDIS_URL),
            namespace,
            lease_s=settings.DUEL_ENGINE_REQUEST_TIMEOUT_S,
        )
    return LocalFairQueue(round_id, lease_s=settings.DUEL_ENGINE_REQUEST_TIMEOUT_S)


def drain(queue: EngineQueue, limit: int, execute) -> int:
    """Run queued requests while a slot is free; return how many ran.

    After releasing its slot a dispatcher looks again, so a request pushed while every slot
    was busy is never stranded.
    """
    ran = 0
    while True:
        lease = queue.acquire_slot(limit)
        if lease is None:
            return ran
        try:
            request = queue.pop()
            if request is not None:
                execute(request)
                ran += 1
        finally:
            queue.release_slot(lease)
        if request is None and queue.pending() == 0:
            return ran

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

_ACQUIRE = """
local held = tonumber(redis.call('GET', KEYS[1]) or '0')
if held >= tonumber(ARGV[1]) then return 0 end
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
"""

_RELEASE = """
local held = tonumber(redis.call('GET', KEYS[1]) or '0')
if held > 0 then redis.call('DECR', KEYS[1]) end
return 1
"""


class EngineQueue(TypingProtocol):
    def push(self, entrant: int, request: int) -> None: ...
    def pop(self) -> int | None: ...
    def pending(self) -> int: ...
    def acquire_slot(self, limit: int) -> bool: ...
    def release_slot(self) -> None: ...


class RedisFairQueue:
    """The production queue: per-entrant lists plus a set of entrants with pending work."""

    def __init__(self, client, namespace: int | str, *, slot_ttl_s: int = 3600) -> None:
        self.client = client
        self.prefix = f"duel:engine:{namespace}:"
        self.active = self.prefix + "active"
        self.slots = self.prefix + "slots"
        self.slot_ttl_s = slot_ttl_s
        self._pop = client.register_script(_POP)
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)

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

    def acquire_slot(self, limit: int) -> bool:
        return bool(self._acquire(keys=[self.slots], args=[limit, self.slot_ttl_s]))

    def release_slot(self) -> None:
        self._release(keys=[self.slots])

    def clear(self) -> None:
        for key in self.client.scan_iter(self.prefix + "*"):
            self.client.delete(key)


class LocalFairQueue:
    """The embedded default's stand-in: the same rule in one process."""

    _queues: dict[int, dict[int, deque[int]]] = {}
    _slots: dict[int, int] = {}
    _lock = threading.Lock()

    def __init__(self, round_id: int, rng: random.Random | None = None) -> None:
        self.round_id = round_id
        self.rng = rng or random.SystemRandom()

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

    def acquire_slot(self, limit: int) -> bool:
        with self._lock:
            held = self._slots.get(self.round_id, 0)
            if held >= limit:
                return False
            self._slots[self.round_id] = held + 1
            return True

    def release_slot(self) -> None:
        with self._lock:
            self._slots[self.round_id] = max(0, self._slots.get(self.round_id, 0) - 1)


def queue_for(round_id: int) -> EngineQueue:
    """The round's queue: Redis when configured, the local stand-in otherwise."""
    if settings.REDIS_URL:
        import redis
        from django.db import connection

        # Keyed by database too, so two deployments (or test databases) sharing a Redis never
        # mix their queues.
        namespace = f"{connection.settings_dict['NAME']}:{round_id}"
        return RedisFairQueue(redis.Redis.from_url(settings.REDIS_URL), namespace)
    return LocalFairQueue(round_id)


def drain(queue: EngineQueue, limit: int, execute) -> int:
    """Run queued requests while a slot is free; return how many ran.

    After releasing its slot a dispatcher looks again, so a request pushed while every slot
    was busy is never stranded.
    """
    ran = 0
    while True:
        if not queue.acquire_slot(limit):
            return ran
        try:
            request = queue.pop()
            if request is not None:
                execute(request)
                ran += 1
        finally:
            queue.release_slot()
        if request is None and queue.pending() == 0:
            return ran

"""Settings of the voting load benchmark: the project's settings, rate limits lifted.

Every request of the load test comes from one loopback address and a few hundred voters in a
few seconds, which the real limits would (rightly) refuse. The limits stay in the request path
(the cache is still incremented for every request); only their ceilings are raised.
"""

from duel.settings import *  # noqa: F403


class _Unlimited(dict):
    """Every limit name maps to a ceiling no load test reaches."""

    def get(self, name, default=None):
        return (10**9, 60)


DUEL_VOTING_RATE_LIMITS = _Unlimited()

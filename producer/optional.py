"""Optional dependencies, imported when a setting asks for them, with the extra to install."""

from __future__ import annotations

from types import ModuleType

__all__ = ["need_redis"]


def need_redis() -> ModuleType:
    """redis-py, for a Redis broker, done markers, dedup, rate limits, budgets, the cache."""
    try:
        import redis
    except ImportError:
        raise RuntimeError(
            "a Redis URL is configured (the broker, VEREDITO_REDIS_URL): "
            "install the extra: pip install 'veredito[redis]'"
        ) from None
    return redis

"""veredito's error tree.

    VereditoError
    ├── RetryableError                 try again later: the same request may succeed
    │   ├── JudgeTimeout               the judge did not answer in time
    │   ├── JudgeConnectionError       connection refused, reset or lost
    │   ├── JudgeRateLimited           HTTP 429; carries ``retry_after`` seconds when sent
    │   ├── JudgeServerError           HTTP 5xx (and 408, 409)
    │   └── JudgeKeyRefused            HTTP 401/403 where the worker holds triples until the key
    │                                  is fixed (the circuit breaker opens; nothing is failed)
    └── PermanentError                 retrying the same request cannot help
        ├── InvalidTriple              (producer.triple) the input breaks the contract
        ├── JudgeRequestRejected       HTTP 4xx: 400, 401, 403, 404, 422 ...
        └── JudgeOutputInvalid         the judge's reply is invalid after repair and one re-ask

Only ``RetryableError`` is ever retried; a bare ``Exception`` never is.  Every exception keeps its
state in ``args`` so it survives pickling across processes.
"""

from __future__ import annotations

__all__ = [
    "JudgeConnectionError",
    "JudgeKeyRefused",
    "JudgeOutputInvalid",
    "JudgeRateLimited",
    "JudgeRequestRejected",
    "JudgeServerError",
    "JudgeTimeout",
    "PermanentError",
    "RetryableError",
    "VereditoError",
]


class VereditoError(Exception):
    """Base of every error veredito raises on purpose."""

    kind = "error"


class RetryableError(VereditoError):
    kind = "judge_unavailable"


class PermanentError(VereditoError):
    kind = "permanent"


class JudgeTimeout(RetryableError):
    pass


class JudgeConnectionError(RetryableError):
    pass


class JudgeServerError(RetryableError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message, status)
        self.status = status

    def __str__(self) -> str:
        return str(self.args[0])


class JudgeRateLimited(JudgeServerError):
    def __init__(self, message: str, status: int = 429, retry_after: float | None = None) -> None:
        Exception.__init__(self, message, status, retry_after)
        self.status = status
        self.retry_after = retry_after


class JudgeKeyRefused(RetryableError):
    """The judge refused our credentials; waiting (for an operator) can fix it."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message, status)
        self.status = status

    def __str__(self) -> str:
        return str(self.args[0])


class JudgeRequestRejected(PermanentError):
    kind = "judge_request_rejected"

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message, status)
        self.status = status

    def __str__(self) -> str:
        return str(self.args[0])


class JudgeOutputInvalid(PermanentError):
    """The judge's reply cannot be used.  ``raw`` is the reply's text, kept for dead letters."""

    kind = "judge_output_invalid"

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message, raw)
        self.raw = raw

    def __str__(self) -> str:
        return str(self.args[0])

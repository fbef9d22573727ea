"""The calibration ``serve --store`` refits, followed by the judges of a worker or ``veredito run``
(issue 30): ``VEREDITO_CALIBRATION=https://serve.example/v1/calibration``.

At start the calibration is fetched once (``VEREDITO_CALIBRATION_TOKEN`` as the bearer token);
a server that cannot be reached, or a store that has none yet (``404``), leaves the shipped
calibration in use with one WARNING — never a crash. Then a daemon thread asks again every
``VEREDITO_CALIBRATION_POLL`` seconds with ``If-None-Match`` (the version is the ETag: an
unchanged calibration costs a ``304``). A new one is swapped in by assigning each following
judge's ``calibration`` attribute — one reference, read once at each judgement, so no lock — and
every verdict stamps the version it was judged with (``judge.calibration_version``). A body that
is not a calibration is refused with a WARNING naming what is wrong, and the last good one kept.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from veredito.worker.confidence import (
    Calibration,
    CalibrationError,
    CalibrationUnavailable,
    calibration_version,
    default_calibration,
    fetch_calibration,
)
from veredito.worker.verdict import JudgeInfo

__all__ = ["CalibrationFeed", "stamped"]

log = logging.getLogger(__name__)


class CalibrationFeed:
    """One URL's calibration, kept current by polling; :meth:`follow` hands it to a judge."""

    def __init__(
        self, url: str, token: str | None = None, poll: float = 60.0, timeout: float = 10.0
    ) -> None:
        self.url = url
        self.poll = poll
        self.timeout = timeout
        self._token = token
        self.current: Calibration = default_calibration()
        self._etag: str | None = None
        self._followers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._metrics: weakref.WeakSet[Any] = weakref.WeakSet()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._away = False  # the last poll failed (logged once until it answers again)

    @property
    def version(self) -> int | None:
        return calibration_version(self.current)

    def start(self) -> None:
        """Fetch once now, then poll in the background."""
        self.fetch(first=True)
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="veredito-calibration", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self.fetch()
            except Exception as exc:  # the poll must never die: the last good one stays
                log.error("polling the calibration failed (%s)", type(exc).__name__)

    def fetch(self, *, first: bool = False) -> bool:
        """Ask the server once; True when a new calibration was swapped in."""
        try:
            found, tag = fetch_calibration(self.url, self._token, self._etag, self.timeout)
        except CalibrationUnavailable as exc:
            if first:
                why = "the store has none yet" if exc.status == 404 else str(exc)
                log.warning(
                    "VEREDITO_CALIBRATION: no calibration from %s (%s): the shipped calibration "
                    "is used until it answers",
                    self.url,
                    why,
                )
            elif not self._away:
                log.warning(
                    "VEREDITO_CALIBRATION: %s; keeping calibration version %s",
                    exc,
                    self.version if self.version is not None else "none (the shipped one)",
                )
            self._away = True
            return False
        except CalibrationError as exc:
            log.warning(
                "VEREDITO_CALIBRATION: refused a calibration: %s; keeping version %s",
                exc,
                self.version if self.version is not None else "none (the shipped one)",
            )
            return False
        if self._away and not first:
            log.info("VEREDITO_CALIBRATION answers again")
        self._away = False
        if found is None:  # 304: unchanged
            return False
        self._etag = tag
        self._swap(found)
        log.info(
            "calibration version %s in use (%s)",
            calibration_version(found),
            found.name,
            extra={"calibration_version": calibration_version(found)},
        )
        return True

    def _swap(self, calibration: Calibration) -> None:
        self.current = calibration
        for judge in list(self._followers):
            judge.calibration = calibration  # one reference: each judgement reads it once
        version = calibration_version(calibration)
        for metrics in list(self._metrics):
            metrics.calibration_used(version)

    def follow(self, judge: Any, metrics: Any = None) -> None:
        """``judge.calibration`` is set to the current calibration now and at every change;
        ``metrics`` (a :class:`~veredito.worker.metrics.Metrics`) says which is in use."""
        judge.calibration = self.current
        self._followers.add(judge)
        if metrics is not None:
            self._metrics.add(metrics)
            metrics.calibration_used(self.version)


def stamped(info: JudgeInfo, calibration: Calibration) -> JudgeInfo:
    """``info`` naming the calibration that gave a judgement's confidences, and its version."""
    label = calibration.label(info.kind)
    version = calibration_version(calibration)
    if info.calibration == label and info.calibration_version == version:
        return info
    return info.model_copy(update={"calibration": label, "calibration_version": version})

"""The compiled scan: the one place that knows every detector pattern.

Each family of facts (``laws``, ``ids``, ``bodies``, ``programmes``, ``amounts``, ``places``)
registers its patterns here when it is imported (:func:`pattern`), and a detector reads a text
through a :class:`Scan` of it: ``scan.finditer(PATTERN)`` gives exactly the matches
``PATTERN.regex.finditer(text)`` gives. Two engines give them:

- ``hyperscan`` (the default when the optional ``hyperscan`` package is installed:
  ``pip install veredito[fast]``): one pass of one compiled database per haystack (the text, and
  the text folded) finds where each pattern may start (:mod:`~veredito.worker.rules.superset`),
  and Python's ``re`` confirms each of those starts with ``pattern.match(text, start)``, the
  exact call ``finditer`` makes there; a pattern with no start in the text costs nothing more;
- ``re``: each pattern's own ``finditer``, over the whole text (the pure-Python path).

``VEREDITO_RULES_ENGINE`` chooses: ``re``, ``hyperscan``, or ``auto`` (the default: hyperscan
when it imports and compiles, else ``re``). Both engines give the same mentions and verdicts
(``tests/test_rules_engines.py``); ``docs/rules.md`` says why Hyperscan, measured against
google-re2's ``Set`` and pyahocorasick. The databases are compiled once per process, on the first
scan (about 0.5 s), and each thread scans with its own scratch space. The compiled databases are
kept in a cache file (``VEREDITO_RULES_CACHE``: a directory, or ``off``; by default
``~/.cache/veredito``), keyed by Hyperscan's version, the machine, this code and every pattern,
so that the next process loads them instead (a few milliseconds); where the cache cannot be
written (a read-only filesystem) each process compiles, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from veredito.worker.rules import superset
from veredito.worker.rules.superset import Unsupported, buffer, expressions

__all__ = [
    "ENGINES",
    "ENGINE_VARIABLE",
    "Pattern",
    "Scan",
    "engine",
    "on_engine_change",
    "pattern",
    "patterns",
    "scan",
    "use_engine",
]

log = logging.getLogger(__name__)

ENGINE_VARIABLE = "VEREDITO_RULES_ENGINE"
ENGINES = ("hyperscan", "re")


class Pattern:
    """A detector pattern, by name; ``folded``: it reads the folded text (else the text as
    written); ``scanned``: the scan looks for it (else it is only matched at a known place, as
    ``UF_AFTER_CITY`` after a city's name). ``regex`` is ``None`` until a lazily built pattern
    (the gazetteer's names) is first asked for."""

    __slots__ = ("factory", "folded", "index", "name", "regex", "scanned")

    def __init__(
        self,
        name: str,
        regex: re.Pattern[str] | None,
        factory: Callable[[], re.Pattern[str] | None] | None,
        folded: bool,
        scanned: bool,
        index: int,
    ) -> None:
        self.name = name
        self.regex = regex
        self.factory = factory
        self.folded = folded
        self.scanned = scanned
        self.index = index

    def resolve(self) -> re.Pattern[str] | None:
        """The compiled pattern (built now if it is lazy); ``None``: it can match nothing."""
        if self.regex is None and self.factory is not None:
            self.regex = self.factory()
            self.factory = None
        return self.regex

    def __repr__(self) -> str:
        return f"Pattern({self.name!r}, folded={self.folded}, scanned={self.scanned})"


_PATTERNS: list[Pattern] = []
_NAMES: set[str] = set()


def pattern(
    name: str,
    source: str | re.Pattern[str] | Callable[[], re.Pattern[str] | None],
    *,
    folded: bool,
    scanned: bool = True,
) -> Pattern:
    """Register a detector pattern (its source, a compiled pattern, or a function that builds
    it on first use) under a unique ``name``."""
    if name in _NAMES:
        raise ValueError(f"pattern {name!r} registered twice")
    if _ACTIVE is not None and _ACTIVE.name != "re" and scanned:
        raise RuntimeError(f"pattern {name!r} registered after the scan was compiled")
    if isinstance(source, str):
        regex, factory = re.compile(source), None
    elif isinstance(source, re.Pattern):
        regex, factory = source, None
    else:
        regex, factory = None, source
    found = Pattern(name, regex, factory, folded, scanned, len(_PATTERNS))
    _PATTERNS.append(found)
    _NAMES.add(name)
    return found


def patterns() -> tuple[Pattern, ...]:
    """Every registered pattern, in the order of registration."""
    return tuple(_PATTERNS)


class Scan:
    """One text (and its folded form) read by the active engine."""

    __slots__ = ("_direct", "_starts", "folded", "text")

    def __init__(
        self,
        text: str,
        folded: str,
        starts: dict[int, list[int]] | None = None,
        direct: frozenset[int] = frozenset(),
    ) -> None:
        self.text = text
        self.folded = folded
        self._starts = starts  # pattern index -> where it may start; None: run re over all
        self._direct = direct  # patterns the compiled scan does not hold: run re over all

    def candidates(self, p: Pattern) -> frozenset[int] | None:
        """Where the compiled scan says ``p`` may start; ``None`` when ``re`` reads the whole
        text for it (the ``re`` engine, or a pattern the compiled scan does not hold)."""
        if self._starts is None or p.index in self._direct or not p.scanned:
            return None
        return frozenset(self._starts.get(p.index, ()))

    def may_match(self, p: Pattern) -> bool:
        """False when ``p`` surely has no match here (the compiled scan found no start), so that
        a detector can skip the gate it puts before it; True when it may (always, for ``re``)."""
        starts = self._starts
        return starts is None or p.index in self._direct or p.index in starts

    def finditer(self, p: Pattern) -> Iterable[re.Match[str]]:
        """``p.regex.finditer`` over the text (or the folded text): the same matches."""
        regex = p.regex if p.regex is not None else p.resolve()
        if regex is None:
            return ()
        haystack = self.folded if p.folded else self.text
        starts = self._starts
        if starts is None or p.index in self._direct:
            return regex.finditer(haystack)
        found = starts.get(p.index)
        if not found:
            return ()
        # what finditer does, tried only where the scan says a match may start: the leftmost
        # match at or after the end of the previous one (no pattern matches the empty string)
        match = regex.match
        out: list[re.Match[str]] = []
        end = 0
        for start in sorted(set(found)) if len(found) > 1 else found:
            if start >= end:
                m = match(haystack, start)
                if m is not None:
                    out.append(m)
                    end = m.end()
        return out


class _Re:
    name = "re"

    def scan(self, text: str, folded: str) -> Scan:
        return Scan(text, folded)


CACHE_VARIABLE = "VEREDITO_RULES_CACHE"
_CACHE_FORMAT = "1"


def _cache_key(version: str) -> str:
    """What the compiled databases depend on: Hyperscan's version, the machine, the code that
    derives and compiles the expressions, and every pattern."""
    digest = hashlib.sha256(f"{_CACHE_FORMAT}\0{version}\0{platform.machine()}\0".encode())
    for module in (__file__, superset.__file__):
        digest.update(Path(module).read_bytes())
    for p in _PATTERNS:
        digest.update(f"{p.index}\0{p.name}\0{p.folded}\0{p.scanned}\0".encode())
        regex = p.regex
        digest.update(b"-\0" if regex is None else f"{regex.flags}\0{regex.pattern}\0".encode())
    return digest.hexdigest()[:32]


def _cache_path(key: str) -> Path | None:
    """Where the compiled scan is kept between processes: ``VEREDITO_RULES_CACHE`` (a directory,
    or ``off``), else ``$XDG_CACHE_HOME/veredito`` or ``~/.cache/veredito``."""
    where = os.environ.get(CACHE_VARIABLE, "").strip()
    if where.lower() == "off":
        return None
    try:
        base = (
            Path(where)
            if where
            else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "veredito"
        )
    except RuntimeError:  # no home directory
        return None
    return base / f"rules-scan-{key}.hsdb"


def _trusted(directory: Path) -> bool:
    """Whether the compiled scan kept in ``directory`` may be loaded: a crafted file there
    would reach Hyperscan's deserialiser, so the directory must be this user's own and
    writable by nobody else (as ``ssh`` asks of ``~/.ssh``). A directory that does not exist
    yet is made so by :meth:`_Hyperscan._store`. Without POSIX owners (Windows): trusted."""
    uid = _uid()
    if uid is None:
        return True
    try:
        found = directory.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != uid or found.st_mode & 0o022:
        if directory not in _DISTRUSTED:
            _DISTRUSTED.add(directory)
            log.warning(
                "rules scan: %s is not a directory of this user's that only it can write "
                "(%s): the compiled scan is neither loaded from it nor kept there",
                directory, CACHE_VARIABLE,
            )  # fmt: skip
        return False
    return True


_DISTRUSTED: set[Path] = set()  # warned of once per process


def _uid() -> int | None:
    """This process's user, None where files have no POSIX owner (Windows)."""
    getuid = getattr(os, "getuid", None)
    return None if getuid is None else int(getuid())


def _collect(expression: int, _start: int, end: int, _flags: int, found: list[int]) -> None:
    found.append(end << 16 | expression)  # an int, not a tuple: nothing for the GC to follow


class _Hyperscan:
    """Two Hyperscan databases (patterns on the text as written, patterns on the folded text)
    of the reversed expressions of every scanned pattern."""

    name = "hyperscan"

    def __init__(self) -> None:
        import hyperscan

        self._hs = hyperscan
        self._databases: dict[bool, Any] = {}
        self._meta: dict[bool, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._local = threading.local()
        for p in _PATTERNS:
            p.resolve()
        key = _cache_key(str(getattr(hyperscan, "__version__", "unknown")))
        direct = self._load(key)
        if direct is None:
            direct = self._build()
            self._store(key, direct)
        self._direct = frozenset(direct)

    def _build(self) -> set[int]:
        """Derive every scanned pattern's expressions and compile them; the patterns left to
        ``re`` alone."""
        direct: set[int] = set()
        # per haystack: (expression, pattern index, k) of every expression
        table: dict[bool, list[tuple[str, int, int]]] = {False: [], True: []}
        for p in _PATTERNS:
            regex = p.resolve()
            if not p.scanned:
                direct.add(p.index)  # matched at a known place, or read whole if ever scanned
                continue
            if regex is None:
                continue
            try:
                found = expressions(regex)
            except Unsupported as why:
                log.debug("rules scan: %s read by re alone (%s)", p.name, why)
                direct.add(p.index)
                continue
            table[p.folded] += [(source, p.index, k) for source, k in found]
        for folded, rows in table.items():
            rows = self._compile(folded, rows, direct)
            if len(rows) > 0xFFFF:
                raise Unsupported("more expressions than a hit can name")
            self._meta[folded] = (tuple(i for _, i, _ in rows), tuple(k for _, _, k in rows))
        return direct

    def _load(self, key: str) -> set[int] | None:
        """The databases compiled by an earlier process, from the cache (None: none usable)."""
        path = _cache_path(key)
        if path is None or not _trusted(path.parent):
            return None
        try:
            with path.open("rb") as f:
                if _uid() not in (None, os.fstat(f.fileno()).st_uid):
                    raise ValueError("the file is another user's")
                header = json.loads(f.readline())
                for name, size in header["sizes"].items():
                    folded = name == "folded"
                    blob = f.read(size)
                    if len(blob) != size:
                        raise ValueError("truncated")
                    self._databases[folded] = self._hs.loadb(blob, self._hs.HS_MODE_BLOCK)
                    indexes, ks = header["meta"][name]
                    self._meta[folded] = (tuple(indexes), tuple(ks))
            return set(header["direct"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, self._hs.error) as error:
            log.debug("rules scan: cache %s not usable (%s): compiling", path, error)
            self._databases.clear()
            self._meta.clear()
            return None

    def _store(self, key: str, direct: set[int]) -> None:
        """Keep the databases for the next process (atomically; quietly not, where the cache
        directory cannot be written: a read-only root filesystem)."""
        path = _cache_path(key)
        if path is None:
            return
        blobs = {
            ("folded" if folded else "text"): self._hs.dumpb(db)
            for folded, db in self._databases.items()
        }
        header = {
            "direct": sorted(direct),
            "sizes": {name: len(blob) for name, blob in blobs.items()},
            "meta": {
                ("folded" if folded else "text"): [list(m[0]), list(m[1])]
                for folded, m in self._meta.items()
            },
        }
        temporary: str | None = None
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _trusted(path.parent):
                return
            with tempfile.NamedTemporaryFile("wb", dir=path.parent, delete=False) as f:
                temporary = f.name
                f.write(json.dumps(header).encode() + b"\n")
                for blob in blobs.values():
                    f.write(blob)
            os.replace(temporary, path)
        except OSError as error:
            log.debug("rules scan: cannot keep the compiled scan in %s (%s)", path, error)
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

    def _compile(
        self, folded: bool, rows: list[tuple[str, int, int]], direct: set[int]
    ) -> list[tuple[str, int, int]]:
        """Compile ``rows``; a pattern Hyperscan refuses is left to ``re`` (``direct``)."""
        hs = self._hs
        while rows:
            database = hs.Database(mode=hs.HS_MODE_BLOCK)
            try:
                database.compile(
                    expressions=[source.encode("latin-1") for source, _, _ in rows],
                    ids=list(range(len(rows))),
                    elements=len(rows),
                    flags=0,
                )
            except hs.error as error:
                bad = re.search(r"\(id:(\d+)\)", str(error))
                if bad is None or int(bad.group(1)) >= len(rows):
                    raise
                index = rows[int(bad.group(1))][1]
                log.debug("rules scan: pattern %d read by re alone (%s)", index, error)
                direct.add(index)
                rows = [row for row in rows if row[1] != index]
                continue
            self._databases[folded] = database
            return rows
        return rows

    def _scratch(self, folded: bool) -> Any:
        scratches: dict[bool, Any] | None = getattr(self._local, "scratches", None)
        if scratches is None:
            scratches = self._local.scratches = {}
        found = scratches.get(folded)
        if found is None:
            found = scratches[folded] = self._hs.Scratch(self._databases[folded])
        return found

    def scan(self, text: str, folded: str) -> Scan:
        starts: dict[int, list[int]] = {}
        for is_folded, database in self._databases.items():
            haystack = folded if is_folded else text
            found: list[int] = []
            database.scan(
                buffer(haystack),
                match_event_handler=_collect,
                context=found,
                scratch=self._scratch(is_folded),
            )
            if not found:
                continue
            indexes, ks = self._meta[is_folded]
            n = len(haystack)
            for hit in found:
                expression = hit & 0xFFFF
                index = indexes[expression]
                at = n + ks[expression] - (hit >> 16)
                listed = starts.get(index)
                if listed is None:
                    starts[index] = [at]
                else:
                    listed.append(at)
        return Scan(text, folded, starts, self._direct)


_ACTIVE: _Re | _Hyperscan | None = None
_LOCK = threading.Lock()
_LISTENERS: list[Callable[[], None]] = []


def _choose(wanted: str) -> _Re | _Hyperscan:
    if wanted == "re":
        return _Re()
    try:
        return _Hyperscan()
    except ImportError:
        if wanted == "hyperscan":
            log.warning("%s=hyperscan, but hyperscan is not installed: using re", ENGINE_VARIABLE)
    except Exception:  # a CPU without SSSE3, a database Hyperscan refuses: still judge
        log.warning("rules scan: hyperscan failed to start; using re", exc_info=True)
    return _Re()


def _active() -> _Re | _Hyperscan:
    global _ACTIVE
    if _ACTIVE is None:
        with _LOCK:
            if _ACTIVE is None:
                wanted = os.environ.get(ENGINE_VARIABLE, "auto").strip().lower() or "auto"
                if wanted != "auto" and wanted not in ENGINES:
                    log.warning("%s=%s is not one of auto, hyperscan, re: using auto",
                                ENGINE_VARIABLE, wanted)  # fmt: skip
                    wanted = "auto"
                _ACTIVE = _choose(wanted)
    return _ACTIVE


def scan(text: str, folded: str) -> Scan:
    """Read ``text`` and ``folded`` (its folded form) with the active engine."""
    return (_ACTIVE or _active()).scan(text, folded)


def engine() -> str:
    """The active engine's name: ``hyperscan`` or ``re``."""
    return _active().name


def use_engine(name: str | None = None) -> str:
    """Switch engines (``re``, ``hyperscan``, ``auto``; ``None``: ``VEREDITO_RULES_ENGINE``
    again) and empty the caches that hold mentions (for tests and benchmarks); the name of the
    engine now active."""
    global _ACTIVE
    with _LOCK:
        _ACTIVE = None
    if name is not None:
        with _LOCK:
            _ACTIVE = _choose(name)
    for listener in _LISTENERS:
        listener()
    return engine()


def on_engine_change(listener: Callable[[], None]) -> None:
    """Call ``listener`` when :func:`use_engine` switches (a cache of mentions empties)."""
    _LISTENERS.append(listener)

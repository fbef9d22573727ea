"""The judge prompts: the user's two templates, shipped byte for byte, and their rendering.

Each template is a ``str.format`` template with ``{query}``, ``{context}`` and ``{answer}``
placeholders; ``{{``/``}}`` are literal braces.  User text is substituted once, by
``str.format``, so a query that itself contains ``{context}`` or ``{{`` stays as written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["NAMES", "Template", "load_template", "render_context", "render_prompt"]

NAMES: tuple[str, ...] = ("claims", "faithfulness")
_FILES = {"claims": "claims.pt-BR.txt", "faithfulness": "faithfulness.pt-BR.txt"}


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    text: str
    version: str  # first 12 hex of sha256 over the file's bytes

    def render(self, query: str, chunks: Sequence[str], answer: str) -> str:
        return render_prompt(self, query, chunks, answer)

    def fill(self, query: str, context_block: str, answer: str) -> str:
        """Render with an already numbered context block (see :func:`render_context`)."""
        return self.text.format(query=query, context=context_block, answer=answer)


@cache
def load_template(name: str) -> Template:
    """Load a shipped template by name (``claims`` or ``faithfulness``)."""
    try:
        filename = _FILES[name]
    except KeyError:
        raise ValueError(f"unknown prompt {name!r}; choose from {', '.join(NAMES)}") from None
    data = resources.files(__name__).joinpath(filename).read_bytes()
    return Template(name=name, text=data.decode("utf-8"), version=_version(data))


def _version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def render_context(chunks: Sequence[str]) -> str:
    """Number the chunks from 1 and join them with a blank line (chunk ``[1]`` is index 0)."""
    return "\n\n".join(f"[{i}] {chunk}" for i, chunk in enumerate(chunks, 1))


def render_prompt(template: Template, query: str, chunks: Sequence[str], answer: str) -> str:
    return template.fill(query, render_context(chunks), answer)

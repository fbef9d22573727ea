"""Other log shapes onto the triple contract: ``--map FIELD=EXPRESSION`` and named presets.

An expression is JMESPath (the query language of the AWS CLI; ``jmespath`` is its well-kept
reference implementation), evaluated on each input object. ``FIELD`` is a field of the contract
(``id``, ``query``, ``context``, ``answer``, ``metadata``) or ``metadata.<key>``. Fields that are
not mapped keep what the object has under their own names and aliases, so ``--map
answer=response.text`` alone is enough when the rest already fits. A field whose expression
finds nothing is left out, and the contract then says what is missing.

Presets, for the shapes users have:

- ``ragas``: RAGAS samples (``user_input``, ``retrieved_contexts``, ``response``, ``reference``);
- ``aferiq``: aferiq-eval payloads, RAG traces and agent traces (``goal``, ``final_answer``, and
  the outputs of ``retrieval`` and ``tool`` steps as the context);
- ``langchain``: LangChain run exports (``inputs``/``outputs``, documents as ``page_content``).

Example: ``{"request": {"question": …}, "retrieval": {"docs": [{"text": …}]}, "response":
{"text": …}}`` is read with ``--map query=request.question --map "context=retrieval.docs[].text"
--map answer=response.text``.
"""

from __future__ import annotations

from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult

__all__ = ["PRESETS", "Mapper", "MappingError", "parse_maps"]

FIELDS = ("id", "query", "context", "answer", "metadata")

PRESETS: dict[str, dict[str, str]] = {
    "ragas": {
        "query": "user_input",
        "context": "retrieved_contexts",
        "answer": "response",
    },
    "aferiq": {
        "id": "trace_id",
        "query": "query || goal",
        "context": "context || steps[?step_type=='retrieval' || step_type=='tool'].step_output",
        "answer": "answer || final_answer",
    },
    "langchain": {
        "id": "id || run_id",
        "query": "inputs.question || inputs.query || inputs.input || inputs.user_input",
        "context": "outputs.source_documents[].page_content || outputs.context[].page_content "
        "|| inputs.context[].page_content || inputs.context",
        "answer": "outputs.answer || outputs.result || outputs.output || outputs.text",
    },
}


class MappingError(ValueError):
    """A ``--map`` that cannot be used; the message says which and why."""


def parse_maps(specs: list[str]) -> dict[str, str]:
    """``["query=a.b", "langchain", ...]`` → field → expression (presets first, then fields)."""
    expressions: dict[str, str] = {}
    for spec in specs:
        target, sep, expression = spec.partition("=")
        target = target.strip()
        if not sep:
            if target not in PRESETS:
                known = ", ".join(sorted(PRESETS))
                raise MappingError(f"--map {spec!r}: not FIELD=EXPRESSION nor a preset ({known})")
            expressions.update(PRESETS[target])
            continue
        if target not in FIELDS and not (target.startswith("metadata.") and len(target) > 9):
            raise MappingError(
                f"--map {spec!r}: the field must be one of {', '.join(FIELDS)} or metadata.KEY"
            )
        expressions[target] = expression.strip()
    return expressions


class Mapper:
    def __init__(self, expressions: dict[str, str]) -> None:
        self._compiled: list[tuple[str, ParsedResult]] = []
        for target, expression in expressions.items():
            try:
                self._compiled.append((target, jmespath.compile(expression)))
            except JMESPathError as exc:
                raise MappingError(f"--map {target}={expression}: {exc}") from None

    def __bool__(self) -> bool:
        return bool(self._compiled)

    def apply(self, value: Any) -> Any:
        """The mapped object; a value that is not an object is returned as it is (the contract
        rejects it with its own message)."""
        if not self._compiled or not isinstance(value, dict):
            return value
        mapped = dict(value)
        extra: dict[str, Any] = {}
        for target, compiled in self._compiled:
            try:
                found = compiled.search(value)
            except (JMESPathError, TypeError, ValueError):
                found = None
            if target.startswith("metadata."):
                if found is not None:
                    extra[target[9:]] = found
            elif found is not None:
                mapped[target] = found
        if extra:
            metadata = mapped.get("metadata")
            mapped["metadata"] = {**(metadata if isinstance(metadata, dict) else {}), **extra}
        return mapped

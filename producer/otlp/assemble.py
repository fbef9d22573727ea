"""A complete trace into a triple (spec §3), whatever convention its spans follow.

Each span is read by the module of its convention (the first that recognises it, in this order):
:mod:`.openinference`, :mod:`.langfuse`, :mod:`.traceloop`, :mod:`.pydantic_ai`, :mod:`.genai`.
Spans are classified by what they are — an LLM call, a retriever, a tool call, an agent or chain
— not by the mere presence of a ``gen_ai.*`` attribute. Then:

- the root is the trace's local root: the span without a parent, else the span whose parent is
  not in the trace (a service behind a traced gateway: its root's parent is remote). A root that
  is a retriever, an embedding, a reranker or a tool call is no answer: the trace is not judged
  (:attr:`Assembled.skipped` says why, and it is counted);
- query: the root's input as a question (the user's last message when it holds chat messages),
  else a retriever's query, else the last user message of the last LLM call;
- context: the documents of the retrievals, in start order, each in its own order; with no
  retrieval, the results of the tool calls (an agent's evidence), in start order, of the tools
  ``retrieval_tools`` names (``VEREDITO_OTLP_RETRIEVAL_TOOLS``; every tool by default); with
  neither (or retrievals that name their documents without their text), the system messages of
  the last LLM call, where RAG apps put what they retrieved (``metadata.otlp_context`` says
  ``tools`` or ``system_messages`` when the context came from there);
- answer: the root's output as an answer (the assistant's text when it holds chat messages),
  else the last LLM call's;
- ``metadata.app``: the resource's ``service.name``, else ``openinference.project.name``;
  ``metadata.release``: the resource's ``service.version`` (spec §18); the id: the trace id.

A field not found is left ``None`` (or empty) and ``metadata.otlp.looked_for`` names, for each
field missing, the attributes looked for: the rejected verdict says what was mapped and what was
missing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from types import ModuleType
from typing import Any

from veredito.producer.otlp import genai, langfuse, openinference, pydantic_ai, traceloop
from veredito.producer.otlp.spans import Span
from veredito.producer.triple import check_release

__all__ = ["NOT_AN_ANSWER", "Assembled", "assemble", "convention_of", "triple_from"]

READERS: tuple[tuple[str, ModuleType], ...] = (
    ("openinference", openinference),
    ("langfuse", langfuse),
    ("traceloop", traceloop),
    ("pydantic_ai", pydantic_ai),
    ("genai", genai),
)
NOT_AN_ANSWER = ("RETRIEVER", "EMBEDDING", "RERANKER", "TOOL")
ANSWERING = ("CHAIN", "AGENT", "LLM", "")  # a root of these kinds may be judged

LOOKED_FOR = {
    "query": (
        "the root span's input (input.value, traceloop.entity.input, "
        "langfuse.observation.input, gen_ai.input.messages), a retriever's query "
        "(gen_ai.retrieval.query.text), or a user message of an LLM span "
        "(llm.input_messages.N.message.*, gen_ai.input.messages, gen_ai.prompt.N.*)"
    ),
    "context": (
        "retriever spans' documents (retrieval.documents.N.document.content, "
        "gen_ai.retrieval.documents, a retriever's traceloop.entity.output or "
        "langfuse.observation.output) or tool calls' results (gen_ai.tool.call.result, a TOOL "
        "span's output.value)"
    ),
    "answer": (
        "the root span's output (output.value, traceloop.entity.output, "
        "langfuse.observation.output, final_result) or an LLM span's reply "
        "(llm.output_messages.0.message.content, gen_ai.output.messages, "
        "gen_ai.completion.N.content)"
    ),
}


def convention_of(span: Span) -> tuple[str, ModuleType]:
    """The convention a span follows, and its reader; a span none recognises is read for the
    generic ``input.value``/``output.value`` (OpenInference's names, which others reuse)."""
    for name, reader in READERS:
        if reader.recognise(span):
            return name, reader
    return "", openinference


@dataclass(slots=True)
class Read:
    """One span with what its convention's reader says it is."""

    span: Span
    convention: str
    reader: ModuleType
    kind: str


@dataclass(slots=True)
class Assembled:
    """What a complete trace became: its triple, or why it is not judged."""

    trace_id: str
    spans: int
    triple: dict[str, Any] | None = None
    skipped: str | None = None  # not judged: the reason (e.g. "root_is_retriever")
    missing: list[str] = field(default_factory=list)  # query, context, answer not found


def _read(span: Span) -> Read:
    kind = span.attributes.get("openinference.span.kind")
    if kind is not None:  # the most common convention, read without the search
        return Read(span, "openinference", openinference, str(kind).upper())
    name, reader = convention_of(span)
    return Read(span, name, reader, reader.kind(span) or "")


_start = attrgetter("start")


def local_root(spans: Sequence[Span], ordered: bool = False) -> Span:
    """The span without a parent, else the earliest span whose parent is not in the trace
    (``ordered``: the spans are in start order already)."""
    in_order = spans if ordered else sorted(spans, key=_start)
    for span in in_order:
        if not span.parent_id.strip("0"):
            return span
    ids = {s.span_id for s in spans}
    for span in in_order:
        if span.parent_id not in ids:
            return span
    return in_order[0]


def _app(root: Span, spans: Sequence[Span]) -> str | None:
    service = root.service
    if service and not service.startswith("unknown_service"):
        return service
    for span in spans:
        project = span.resource.get("openinference.project.name") if span.resource else None
        if isinstance(project, str) and project.strip():
            return project
    return None


def _tool_allowed(name: str | None, retrieval_tools: Sequence[str] | None) -> bool:
    if not retrieval_tools:
        return True
    return name is not None and any(fnmatch.fnmatchcase(name, p) for p in retrieval_tools)


_Item = tuple[Span, ModuleType, str, str]  # a span, its reader, its kind, its convention


def classify(span: Span) -> _Item:
    """A span, its reader, its kind (``LLM``, ``RETRIEVER``, ``CHAIN`` …) and its convention."""
    kind = span.attributes.get("openinference.span.kind")
    if kind is not None:  # the most common convention, read without the search
        return span, openinference, str(kind).upper(), "openinference"
    name, reader = convention_of(span)
    return span, reader, reader.kind(span) or "", name


def _innermost(retrievers: list[_Item], items: list[_Item]) -> list[_Item]:
    """The retrievers that hold no other retriever: an app's ``retrieve`` step around its
    vector store's span returns the same documents, which count once."""
    if len(retrievers) < 2:
        return retrievers
    parent = {item[0].span_id: item[0].parent_id for item in items}
    outer: set[str] = set()
    for item in retrievers:
        seen, up = set(), parent.get(item[0].span_id, "")
        while up and up in parent and up not in seen:
            seen.add(up)
            outer.add(up)
            up = parent[up]
    return [item for item in retrievers if item[0].span_id not in outer]


def assemble(spans: Sequence[Span], retrieval_tools: Sequence[str] | None = None) -> Assembled:
    """The triple of a complete trace (see the module's documentation)."""
    ordered = sorted(spans, key=_start)
    root_span = local_root(ordered, ordered=True)
    items: list[_Item] = []
    retrievers: list[_Item] = []
    llms: list[_Item] = []
    root: _Item | None = None
    for span in ordered:  # one pass: each span classified, the retrievers, LLM calls and root
        kind = span.attributes.get("openinference.span.kind")
        if kind is not None:  # the most common convention, read without the search
            item: _Item = (span, openinference, str(kind).upper(), "openinference")
        else:
            item = classify(span)
        items.append(item)
        if item[2] == "RETRIEVER":
            retrievers.append(item)
        elif item[2] == "LLM":
            llms.append(item)
        if span is root_span:
            root = item
    assert root is not None  # local_root is one of the spans
    done = Assembled(trace_id=root_span.trace_id, spans=len(items))
    root_kind = root[2]
    if root_kind in NOT_AN_ANSWER:
        done.skipped = f"root_is_{root_kind.lower()}"
        return done
    retrievers = _innermost(retrievers, items)

    query = root[1].question(root_span)
    for span, reader, _, _ in retrievers:
        query = query or reader.question(span)
    for span, reader, _, _ in reversed(llms):
        query = query or reader.question(span)

    answer = root[1].answer(root_span)
    for span, reader, _, _ in reversed(llms):
        answer = answer or reader.answer(span)

    context = [doc for span, reader, _, _ in retrievers for doc in reader.documents(span)]
    context_from = "retrieval"
    if not context:
        context_from = "tools"
        for span, reader, kind, _ in items:
            if kind == "TOOL":
                name, results = reader.tool(span)
                if _tool_allowed(name, retrieval_tools):
                    context += results
    if not context and llms:
        # retrievals that name their documents without their text (the GenAI conventions'
        # documents are {id, score}): the documents are where the app put them, in the
        # system messages of its last LLM call
        context_from = "system_messages"
        context = llms[-1][1].system(llms[-1][0])

    metadata: dict[str, Any] = {"source": "otlp", "trace_id": root_span.trace_id}
    app = _app(root_span, spans)
    if app:
        metadata["app"] = app
    release = root_span.resource.get("service.version") if root_span.resource else None
    if release is not None:  # spec §18; checked with the triple (a bad one names the field)
        metadata["release"] = release if isinstance(release, str) else str(release)
        if check_release(metadata["release"]) is not None:  # named by where it came from
            metadata["release_from"] = "service.version"
    missing = []
    if not query:
        missing.append("query")
    if not context:
        missing.append("context")
    if not answer:
        missing.append("answer")
    if context and context_from != "retrieval":
        metadata["otlp_context"] = context_from
    if missing:
        metadata["otlp"] = {
            "conventions": sorted({item[3] for item in items if item[2]}),
            "root": {"name": root_span.name, "kind": root_kind or "unknown"},
            "looked_for": {name: LOOKED_FOR[name] for name in missing},
        }
    done.missing = missing
    done.triple = {
        "id": root_span.trace_id,
        "query": query,
        "context": context,
        "answer": answer,
        "metadata": metadata,
    }
    return done


def triple_from(spans: list[Span]) -> dict[str, Any]:
    """The triple of a complete trace; a trace that is not judged gives its skeleton."""
    done = assemble(spans)
    if done.triple is not None:
        return done.triple
    return {"id": done.trace_id, "query": None, "context": [], "answer": None, "metadata": {}}

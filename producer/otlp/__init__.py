"""OpenTelemetry in: OTLP spans (and the GenAI events sent as logs) assembled per trace into
triples, whatever tracing convention the app's instrumentation follows (``docs/ingestion.md``).

One module a part:

- :mod:`.spans`: the span as read (:class:`Span`), whatever its encoding; :class:`OTLPError`;
- :mod:`.decode`: ``ExportTraceServiceRequest`` bodies, protobuf (``opentelemetry-proto``'s
  messages) or OTLP/JSON (ids in hex, as that encoding says), into spans (``decode``, or
  ``decode_iter`` one by one), and the replies (an empty success, or ``partial_success`` with the
  spans rejected and the first reasons);
- :mod:`.logs`: ``ExportLogsServiceRequest`` bodies (``/v1/logs``): the GenAI events
  (``gen_ai.client.inference.operation.details``, the older per-message events), joined to their
  chat spans by trace and span id when the trace is assembled;
- :mod:`.buffer`: :class:`TraceAssembler`, the per-tenant buffers that keep a trace's spans and
  events until the trace is complete;
- :mod:`.assemble`: a complete trace into a triple (:func:`assemble`): spans classified by what
  they are (LLM call, retriever, tool call, agent or chain), the query, context and answer found,
  or why the trace is not judged, and, for a field not found, the attributes looked for;
- :mod:`.messages`: text out of the JSON the conventions put in attributes (chat messages,
  a chain's inputs and outputs): a question is the last user message, an answer the last
  assistant text;
- one reader per tracing convention, each saying how its spans are read, tried in this order:
  :mod:`.openinference` (Arize Phoenix's instrumentations), :mod:`.langfuse` (Langfuse SDK v3),
  :mod:`.traceloop` (OpenLLMetry), :mod:`.pydantic_ai` (pydantic-ai, as Logfire traces it),
  :mod:`.genai` (OpenTelemetry's GenAI semantic conventions).

A trace is complete when its root comes: the span without a parent, or the one whose parent the
SDK marked remote (span flags 0x300); a chain or agent span whose parent is not in the trace is
taken for the root after ``quiet`` seconds [2] with no new span (unless the SDK said that parent
is local), and a trace whose LLM calls carry no messages waits ``event_wait`` seconds [5] for
their GenAI events. Spans of one trace may come in several requests and in any order.

The buffers are per tenant: ``add(tenant, spans)`` files spans under (tenant, trace id), where the
tenant is an opaque string the server derives from the ingest token. Spans of one trace id sent by
two tenants never meet: each tenant's triple is built from its own spans only. Each tenant has its
own quotas (constructor keywords, defaults in brackets): pending traces ``max_traces`` [10 000],
pending spans and events ``max_spans`` [50 000] and estimated bytes of them ``max_bytes``
[32 MiB] (:func:`span_size`: the lengths of a span's ids, name and attribute keys and string
values, nested lists and maps walked, plus a fixed overhead per span and per attribute; decoding
counts it as it reads the span, :attr:`Span.size`, so that buffering does not walk it again). A
span that would exceed a quota pushes out that tenant's oldest pending traces, whole, until it
fits — never another tenant's. A span bigger than ``max_bytes`` by itself, one beyond
``max_spans_per_trace`` [2 000] spans of its trace (the first root span is always taken), or one
whose trace alone would outgrow a quota, is dropped. A trace whose root has not come within
``timeout`` seconds [30] of its first span is assembled from its local root when that is a chain
or an agent, else forgotten (:meth:`TraceAssembler.expire_traces`).

Nothing is dropped silently: ``dropped`` counts evicted and incomplete traces and oversize spans,
``dropped_by_tenant`` the same per tenant, and one WARNING at most every ``log_interval`` seconds
[10] sums up the drops since the previous one (counts only: no tenant, trace id or span content;
a line per trace only at DEBUG). Spans wait in memory until their trace is complete: a crash
loses the incomplete traces of that moment (a complete one is published with confirms like any
triple).
"""

from __future__ import annotations

from veredito.producer.otlp.assemble import Assembled, assemble, triple_from
from veredito.producer.otlp.buffer import DROP_REASONS, TraceAssembler, span_size
from veredito.producer.otlp.decode import decode, decode_iter, empty_response, partial_success
from veredito.producer.otlp.spans import PROTOBUF, OTLPError, Span

__all__ = [
    "DROP_REASONS",
    "PROTOBUF",
    "Assembled",
    "OTLPError",
    "Span",
    "TraceAssembler",
    "assemble",
    "decode",
    "decode_iter",
    "empty_response",
    "partial_success",
    "span_size",
    "triple_from",
]

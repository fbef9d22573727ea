"""OpenTelemetry traces in: OTLP spans assembled per trace into triples.

One module a part: :mod:`.spans` (the span as read), :mod:`.decode` (OTLP/HTTP bodies, protobuf
and JSON), :mod:`.buffer` (the per-tenant buffers), :mod:`.assemble` (a complete trace into a
triple), and one module per tracing convention, each saying how its spans are read:
:mod:`.openinference`, :mod:`.genai`.

``decode`` (or ``decode_iter``, which yields the spans one by one) reads an
``ExportTraceServiceRequest`` in protobuf (``opentelemetry-proto``'s messages) or in OTLP/JSON (ids
in hex, as that encoding says) into :class:`Span` values. :class:`TraceAssembler` keeps the spans
of each trace until its root span (no parent) arrives — spans of one trace may come in several
requests and in any order — and then maps them:

- query: the root span's ``input.value``, else a retriever's, else the last user prompt of an LLM
  span (OpenInference ``llm.input_messages.N.message.*``, GenAI ``gen_ai.prompt.N.*``);
- context: the documents of the retriever spans, in start order, each in index order
  (``retrieval.documents.N.document.content``);
- answer: the root span's ``output.value``, else the last LLM span's output (``output.value``,
  ``llm.output_messages.0.message.content``, ``gen_ai.completion.0.content``);
- ``metadata.app``: the resource's ``service.name``; the id: the trace id.

A value whose ``*.mime_type`` is ``application/json`` is read for its ``query``/``question``/
``input`` (or ``answer``/``output``/``text``) field. Spans are classified by
``openinference.span.kind`` (RETRIEVER, LLM, CHAIN …) or, for GenAI spans, by their
``gen_ai.*`` attributes.

The buffers are per tenant: ``add(tenant, spans)`` files spans under (tenant, trace id), where the
tenant is an opaque string the server derives from the ingest token. Spans of one trace id sent by
two tenants never meet: each tenant's triple is built from its own spans only. Each tenant has its
own quotas (constructor keywords, defaults in brackets): pending traces ``max_traces`` [10 000],
pending spans ``max_spans`` [50 000] and estimated bytes of pending spans ``max_bytes`` [32 MiB]
(:func:`span_size`: the lengths of a span's ids, name and attribute keys and string values, nested
lists and maps walked, plus a fixed overhead per span and per attribute; decoding counts it as it
reads the span, :attr:`Span.size`, so that buffering does not walk it again). A span that would
exceed a quota pushes out that tenant's oldest pending traces, whole, until it fits — never another
tenant's. A span bigger than ``max_bytes`` by itself, one beyond ``max_spans_per_trace`` [2 000]
spans of its trace (the first root span is always taken), or one whose trace alone would outgrow a
quota, is dropped. A trace whose root has not come within ``timeout`` seconds of its first span is
forgotten by :meth:`TraceAssembler.expire`.

Nothing is dropped silently: ``dropped`` counts evicted and incomplete traces and oversize spans,
``dropped_by_tenant`` the same per tenant, and one WARNING at most every ``log_interval`` seconds
[10] sums up the drops since the previous one (counts only: no tenant, trace id or span content;
a line per trace only at DEBUG). Spans wait in memory until their root comes: a crash loses the
incomplete traces of that moment (a complete one is published with confirms like any triple).
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

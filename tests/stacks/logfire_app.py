"""Logfire with a pydantic-ai agent and one retrieval tool, exporting to veredito through the
standard OTLP environment (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS)."""

from __future__ import annotations

import logfire
from common import MODEL, MODEL_URL, QUESTIONS, report, retrieve
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

logfire.configure(send_to_logfire=False, service_name="sac-bot", console=False)
logfire.instrument_pydantic_ai()
model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=MODEL_URL, api_key="x"))
agent = Agent(model, instructions="Responda em português usando apenas os documentos.")
found: dict[str, list[str]] = {}


@agent.tool_plain
def buscar_documentos(consulta: str) -> list[str]:
    """Busca documentos relevantes para a consulta."""
    found["last"] = retrieve(consulta)
    return found["last"]


for question in QUESTIONS:
    result = agent.run_sync(question)
    report(question, found["last"], result.output)
logfire.force_flush()
logfire.shutdown()

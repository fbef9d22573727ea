"""OpenLLMetry (Traceloop) with LangChain: Traceloop.init pointed at veredito, the token as a
header."""

from __future__ import annotations

import os

from common import QUESTIONS, report
from traceloop.sdk import Traceloop

Traceloop.init(
    app_name="sac-bot",
    api_endpoint=os.environ["VEREDITO_URL"],
    headers={"Authorization": f"Bearer {os.environ['VEREDITO_TOKEN']}"},
    disable_batch=True,
    telemetry_enabled=False,
)

from langchain_rag import chain, retrieved  # noqa: E402

rag = chain()
for question in QUESTIONS:
    answer = rag.invoke(question)
    report(question, retrieved["last"], answer)

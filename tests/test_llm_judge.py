"""The LLM judge against the local OpenAI-compatible test server."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS31Validator
from prometheus_client import CollectorRegistry
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from tests.conftest import SHARED, require_shared
from tests.llm_server import ServerThread
from veredito.worker.judges import new_session
from veredito.worker.judges.llm import LLMJudge
from veredito.worker.llm.client import ChatClient
from veredito.worker.metrics import Metrics
from veredito.worker.pipeline import Outcome, Pipeline
from veredito.worker.settings import Settings

OPENAPI = SHARED / "openai" / "openapi.yaml"


@cache
def request_validator() -> OAS31Validator:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    spec = yaml.load(OPENAPI.read_text(encoding="utf-8"), Loader=loader)
    uri = "urn:openai-openapi"
    registry: Registry[Any] = Registry().with_resource(uri, DRAFT202012.create_resource(spec))
    schema = {"$ref": f"{uri}#/components/schemas/CreateChatCompletionRequest"}
    return OAS31Validator(schema, registry=registry)


def assert_valid_requests(bodies: list[dict[str, Any]]) -> None:
    require_shared(OPENAPI)
    validator = request_validator()
    assert bodies
    for body in bodies:
        errors = sorted(validator.iter_errors(body), key=str)
        assert not errors, errors[0].message


def settings_for(server: ServerThread, **extra: Any) -> Settings:
    return Settings(
        llm_base_url=server.base_url, llm_api_key="sk-test", llm_max_backoff=0.01, **extra
    )


async def evaluate(
    server: ServerThread, triple: dict[str, Any], metrics: Metrics | None = None, **extra: Any
) -> Outcome:
    settings = settings_for(server, **extra)
    metrics = metrics or Metrics(CollectorRegistry())
    async with new_session(settings) as session:
        client = ChatClient(
            session,
            base_url=settings.effective_base_url,
            model=settings.llm_model,
            api_key="sk-test",
            timeout=settings.llm_timeout,
            max_tokens=settings.llm_max_tokens,
            json_mode=settings.llm_json_mode,
            max_attempts=settings.llm_max_attempts,
            max_backoff=settings.llm_max_backoff,
            metrics=metrics,
        )
        pipeline = Pipeline(LLMJudge(client, settings.prompts, metrics), settings.limits, metrics)
        return await pipeline.evaluate({"triple": triple, "source": {"line": 1}})


def triple(
    marker: str = "", answer: str = "O prazo é de 7 dias. Veja a Lei 8.069 #invent:LEI."
) -> dict[str, Any]:
    return {
        "query": f"Qual o prazo de arrependimento? {marker}".strip(),
        "context": ["O art. 49 do CDC dá 7 dias.", "Vale para compras fora da loja."],
        "answer": answer,
        "metadata": {"app": "sac"},
    }


async def test_ok_verdict_has_every_field(llm_server: ServerThread) -> None:
    outcome = await evaluate(llm_server, triple())
    v = outcome.verdict
    assert v.status == "ok" and outcome.dead_letter is None
    assert [(c.verdict, c.category) for c in v.claims] == [("grounded", None), ("invented", "LEI")]
    assert v.score == 0.5 and v.reported_score == 0.5 and v.hallucinated
    assert v.categories == {"LEI": 1}
    assert v.faithfulness is not None and v.faithfulness.score == 0.2
    assert (
        v.judge is not None
        and v.judge.kind == "llm"
        and set(v.judge.prompts) == {"claims", "faithfulness"}
    )
    assert v.usage == {"prompt_tokens": 200, "completion_tokens": 40}
    assert v.metadata == {"app": "sac"}
    assert v.timings["judge_seconds"] >= 0
    assert llm_server.script.authorizations == ["Bearer sk-test"] * 2
    assert_valid_requests(llm_server.script.requests)


async def test_request_body_is_the_openai_shape(llm_server: ServerThread) -> None:
    await evaluate(llm_server, triple(), prompts="claims")
    (body,) = llm_server.script.requests
    assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0
    assert body["max_tokens"] == 2048
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert (
        "[1] O art. 49 do CDC dá 7 dias.\n\n[2] Vale para compras" in body["messages"][0]["content"]
    )


async def test_json_mode_can_be_switched_off(llm_server: ServerThread) -> None:
    await evaluate(llm_server, triple(), prompts="faithfulness", llm_json_mode=False)
    (body,) = llm_server.script.requests
    assert "response_format" not in body
    assert_valid_requests(llm_server.script.requests)


@pytest.mark.parametrize("prompts", ["claims", "faithfulness"])
async def test_one_prompt_only(llm_server: ServerThread, prompts: str) -> None:
    v = (await evaluate(llm_server, triple(), prompts=prompts)).verdict
    assert v.status == "ok"
    if prompts == "claims":
        assert v.faithfulness is None and v.claims
    else:
        assert v.claims == [] and v.score is None and v.faithfulness is not None


@pytest.mark.parametrize("marker", ["#llm:bad_once", "#llm:truncated_once"])
async def test_invalid_then_valid_on_reask(llm_server: ServerThread, marker: str) -> None:
    registry = CollectorRegistry()
    v = (await evaluate(llm_server, triple(marker), Metrics(registry), prompts="claims")).verdict
    assert v.status == "ok" and len(v.claims) == 2
    first, second = llm_server.script.requests
    assert len(first["messages"]) == 1
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert "Sua resposta anterior não pôde ser usada" in second["messages"][2]["content"]
    assert (
        registry.get_sample_value("veredito_judge_retries_total", {"reason": "invalid_output"}) == 1
    )
    assert v.usage["prompt_tokens"] == 200  # both calls counted
    assert_valid_requests(llm_server.script.requests)


async def test_invalid_twice_fails_and_keeps_the_raw_reply(llm_server: ServerThread) -> None:
    outcome = await evaluate(llm_server, triple("#llm:bad_twice"), prompts="claims")
    v = outcome.verdict
    assert v.status == "failed"
    assert v.error is not None and v.error.kind == "judge_output_invalid"
    assert v.error.raw_reply == "Desculpe, não consigo avaliar esta resposta agora."
    assert outcome.dead_letter is not None
    assert outcome.dead_letter["raw_reply"] == v.error.raw_reply
    assert outcome.dead_letter["envelope"]["triple"]["answer"].startswith("O prazo")
    assert len(llm_server.script.requests) == 2  # asked once again, no more
    assert v.usage == {"prompt_tokens": 200, "completion_tokens": 40}  # spent all the same


@pytest.mark.parametrize(
    ("marker", "reason"),
    [("#llm:http500_once", "server_error"), ("#llm:http429_once", "rate_limited")],
)
async def test_retryable_http_errors_are_retried(
    llm_server: ServerThread, marker: str, reason: str
) -> None:
    registry = CollectorRegistry()
    v = (await evaluate(llm_server, triple(marker), Metrics(registry), prompts="claims")).verdict
    assert v.status == "ok"
    assert len(llm_server.script.requests) == 2
    assert registry.get_sample_value("veredito_judge_retries_total", {"reason": reason}) == 1


async def test_permanent_http_error_is_not_retried(llm_server: ServerThread) -> None:
    v = (await evaluate(llm_server, triple("#llm:http401"), prompts="claims")).verdict
    assert v.status == "failed"
    assert v.error is not None and v.error.kind == "judge_request_rejected"
    assert "HTTP 401" in v.error.message and "Incorrect API key" in v.error.message
    assert len(llm_server.script.requests) == 1


async def test_timeouts_are_retried_then_fail(llm_server: ServerThread) -> None:
    llm_server.script.slow_seconds = 1.0
    v = (
        await evaluate(
            llm_server, triple("#llm:slow"), prompts="claims", llm_timeout=0.2, llm_max_attempts=2
        )
    ).verdict
    assert v.status == "failed" and v.error is not None and v.error.kind == "judge_unavailable"
    assert len(llm_server.script.requests) == 2


async def test_unreachable_server_fails_as_unavailable() -> None:
    settings = Settings(
        llm_base_url="http://127.0.0.1:9/v1", llm_max_attempts=2, llm_max_backoff=0.01
    )
    async with new_session(settings) as session:
        from veredito.worker.judges import build_judge

        pipeline = Pipeline(build_judge(settings, session), settings.limits)
        v = (await pipeline.evaluate({"triple": triple()})).verdict
    assert v.status == "failed" and v.error is not None and v.error.kind == "judge_unavailable"


@pytest.mark.parametrize(
    ("marker", "repair"), [("#llm:fenced", "fence"), ("#llm:trailing_comma", "syntax")]
)
async def test_repairs_are_counted(llm_server: ServerThread, marker: str, repair: str) -> None:
    registry = CollectorRegistry()
    v = (await evaluate(llm_server, triple(marker), Metrics(registry))).verdict
    assert v.status == "ok" and len(v.claims) == 2
    assert registry.get_sample_value("veredito_judge_output_repairs_total", {"kind": repair}) == 2


async def test_rejected_triple_never_reaches_the_model(llm_server: ServerThread) -> None:
    v = (await evaluate(llm_server, {"query": "q", "answer": "a"})).verdict
    assert v.status == "rejected" and v.error is not None
    assert (
        v.error.message
        == "line 1: context: missing (also accepted: contexts, retrieved_contexts, chunks, documents)"
    )
    assert llm_server.script.requests == []


def test_the_schema_check_can_fail() -> None:
    require_shared(OPENAPI)
    validator = request_validator()
    good = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert validator.is_valid(good)
    assert not validator.is_valid({"model": "m"})
    assert not validator.is_valid({**good, "temperature": "zero"})
    assert not validator.is_valid({**good, "response_format": {"type": "yaml"}})


def test_azure_endpoints_also_get_the_api_key_header() -> None:
    import aiohttp

    async def headers(url: str) -> dict[str, str]:
        async with aiohttp.ClientSession() as session:
            return dict(ChatClient(session, base_url=url, model="m", api_key="k")._headers)

    import asyncio

    azure = asyncio.run(headers("https://acme.openai.azure.com/openai/v1"))
    plain = asyncio.run(headers("https://api.openai.com/v1"))
    assert azure["api-key"] == "k" and azure["Authorization"] == "Bearer k"
    assert "api-key" not in plain and plain["Authorization"] == "Bearer k"

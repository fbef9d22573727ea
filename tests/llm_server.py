"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

It answers ``POST /v1/chat/completions`` from a script: a latency, and behaviours chosen per
triple by a marker written anywhere in the query or answer, ``#llm:<behaviour>``:

=================  =========================================================================
``ok``             (default) a valid reply: one grounded claim per sentence of the answer;
                   a sentence containing ``#invent:<CATEGORY>`` is an invented claim
``fenced``         the valid reply inside a markdown code fence with prose around it
``trailing_comma`` the valid reply with a trailing comma (needs a syntax repair)
``bad_once``       an invalid reply first, a valid one when asked again
``bad_twice``      invalid replies every time (the verdict must fail and keep the reply)
``truncated_once`` ``finish_reason: length`` first, then a valid reply
``http500_once``   HTTP 500 on the first request of the triple, then valid
``http429_once``   HTTP 429 with ``Retry-After: 0`` first, then valid
``http401``        HTTP 401 always
``slow``           waits ``slow_seconds`` before answering
=================  =========================================================================

Faults for the whole server, switched on the :class:`Script` while it runs (the chaos suite):
``down`` answers every request with 503; ``refuse_key`` with 401; ``fault_rate`` makes that share
of requests fail at random, by one of :data:`FAULTS` (500, 503, 429 with ``Retry-After``, a hang
past the client's timeout, a connection reset, a malformed completion).

It also answers the two prompts of RAGAS's Faithfulness metric (statement extraction, then one
verdict per statement; ``#invent:`` marks an unsupported sentence there too), for the side-by-side
benchmark, and ``GET /v1/_served`` says how many completions it has answered.

Run it on its own with ``python tests/llm_server.py --port 8099 --latency 0.2``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

FAULTS = ("http500", "http503", "http429", "hang", "reset", "malformed")
MARKER = re.compile(r"#llm:([a-z0-9_]+)")
INVENT = re.compile(r"#invent:([A-Z_]+)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
SCRIPT = web.AppKey("script", "Script")


@dataclass
class Script:
    latency: float = 0.0
    slow_seconds: float = 5.0
    record: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    attempts: Counter[str] = field(default_factory=Counter)
    served: int = 0
    down: bool = False
    refuse_key: bool = False
    fault_rate: float = 0.0
    hang_seconds: float = 5.0
    seed: int = 7
    faults: Counter[str] = field(default_factory=Counter)
    rng: random.Random = field(init=False)
    # a provider's rate limit: above ``rpm_limit`` requests a minute (with a second of burst),
    # 429 with ``Retry-After: retry_after``; ``accepted_at`` keeps when each accepted one came
    rpm_limit: int | None = None
    retry_after: str = "1"
    accepted_at: list[float] = field(default_factory=list)
    rejected_429: int = 0
    _tat: float = 0.0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def over_limit(self, now: float) -> bool:
        """GCRA at ``rpm_limit``: True (and nothing counted) for a request above the rate."""
        if not self.rpm_limit:
            return False
        interval = 60.0 / self.rpm_limit
        tat = max(self._tat, now)
        if tat - now > 1.0:  # more than a second's burst ahead
            self.rejected_429 += 1
            return True
        self._tat = tat + interval
        self.accepted_at.append(now)
        return False

    def fault(self) -> str | None:
        if self.down:
            return "down"
        if self.refuse_key:
            return "http401"
        if self.fault_rate and self.rng.random() < self.fault_rate:
            return self.rng.choice(FAULTS)
        return None


def _section(prompt: str, start: str, end: str) -> str:
    head = prompt.rfind(start)
    if head < 0:
        return ""
    head += len(start)
    tail = prompt.find(end, head)
    return prompt[head : tail if tail >= 0 else None].strip()


def valid_claims(answer: str) -> dict[str, Any]:
    claims = []
    for sentence in SENTENCE_END.split(answer.strip()):
        if not sentence.strip():
            continue
        invent = INVENT.search(sentence)
        if invent:
            claims.append(
                {
                    "text": sentence,
                    "verdict": "invented",
                    "supported": False,
                    "category": invent.group(1),
                    "chunk_idx": None,
                }
            )
        else:
            claims.append(
                {
                    "text": sentence,
                    "verdict": "grounded",
                    "supported": True,
                    "category": None,
                    "chunk_idx": 0,
                }
            )
    grounded = sum(1 for c in claims if c["verdict"] == "grounded")
    return {
        "claims": claims,
        "score": grounded / len(claims) if claims else 1.0,
        "reasoning": "Resposta avaliada pelo servidor de teste.",
    }


def valid_faithfulness(answer: str) -> dict[str, Any]:
    invented = [s for s in SENTENCE_END.split(answer.strip()) if INVENT.search(s)]
    return {
        "score": 0.2 if invented else 1.0,
        "reasoning": "Avaliação do servidor de teste.",
        "unsupported_claims": invented,
    }


RAGAS_STATEMENTS = "Break down each sentence into one or more fully understandable statements"
RAGAS_NLI = "judge the faithfulness of a series of statements based on a given context"


def ragas_reply(prompt: str) -> str | None:
    """The reply to a RAGAS Faithfulness prompt (its input is the JSON after the last
    ``input:``), or ``None`` for any other prompt."""
    if RAGAS_STATEMENTS not in prompt and RAGAS_NLI not in prompt:
        return None
    data = json.loads(prompt[prompt.rfind("\ninput: ") + 8 : prompt.rfind("\nOutput:")])
    if RAGAS_STATEMENTS in prompt:
        sentences = [s for s in SENTENCE_END.split(data["answer"].strip()) if s.strip()]
        return json.dumps({"statements": sentences}, ensure_ascii=False)
    verdicts = [
        {"statement": s, "reason": "Teste.", "verdict": 0 if INVENT.search(s) else 1}
        for s in data["statements"]
    ]
    return json.dumps({"statements": verdicts}, ensure_ascii=False)


def completion(content: str, finish_reason: str = "stop", model: str = "test") -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
        },
    }


async def chat_completions(request: web.Request) -> web.Response:
    script: Script = request.app[SCRIPT]
    body = await request.json()
    if script.record:
        script.requests.append(body)
        script.authorizations.append(request.headers.get("Authorization"))
    messages = body["messages"]
    prompt = messages[0]["content"]
    answer = _section(prompt, "\nRESPOSTA:\n", "\n\nResponda APENAS")
    query = _section(prompt, "\nPERGUNTA:\n", "\n\nCONTEXTO:")
    found = MARKER.search(query + " " + answer)
    behaviour = found.group(1) if found else "ok"
    is_faithfulness = '"unsupported_claims"' in prompt
    key = hashlib.sha256(prompt.encode()).hexdigest()
    script.attempts[key] += 1
    attempt = script.attempts[key]
    script.served += 1
    if script.over_limit(time.monotonic()):
        return web.json_response(
            {"error": {"message": "Rate limit reached for requests"}},
            status=429,
            headers={"Retry-After": script.retry_after},
        )

    delay = script.slow_seconds if behaviour == "slow" else script.latency
    if delay:
        await asyncio.sleep(delay)
    fault = script.fault()
    if fault is not None:
        script.faults[fault] += 1
        return await _fail(request, fault, script)

    if behaviour == "http401":
        return web.json_response({"error": {"message": "Incorrect API key provided"}}, status=401)
    if behaviour == "http500_once" and attempt == 1:
        return web.json_response({"error": {"message": "boom"}}, status=500)
    if behaviour == "http429_once" and attempt == 1:
        return web.json_response(
            {"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0"}
        )

    ragas = ragas_reply(prompt)
    if ragas is not None:
        return web.json_response(completion(ragas, "stop", body.get("model", "test")))
    reply = valid_faithfulness(answer) if is_faithfulness else valid_claims(answer)
    content = json.dumps(reply, ensure_ascii=False)
    finish = "stop"
    if behaviour == "bad_twice" or (behaviour == "bad_once" and len(messages) == 1):
        content = "Desculpe, não consigo avaliar esta resposta agora."
    elif behaviour == "truncated_once" and len(messages) == 1:
        content, finish = content[: len(content) // 2], "length"
    elif behaviour == "fenced":
        content = f"Aqui está a avaliação:\n```json\n{content}\n```\nEspero ter ajudado."
    elif behaviour == "trailing_comma":
        content = content[:-1] + ",}"
    return web.json_response(completion(content, finish, body.get("model", "test")))


async def _fail(request: web.Request, fault: str, script: Script) -> web.Response:
    if fault == "hang":
        await asyncio.sleep(script.hang_seconds)
        return web.json_response({"error": {"message": "too late"}}, status=504)
    if fault == "reset":
        if request.transport is not None:  # None when the client has gone already
            request.transport.abort()
        return web.Response(status=500)
    if fault == "malformed":
        return web.Response(text='{"id": "chatcmpl-x", "choices": [{"mess', status=200)
    if fault == "http429":
        return web.json_response(
            {"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "1"}
        )
    if fault == "http401":
        return web.json_response({"error": {"message": "Incorrect API key provided"}}, status=401)
    status = 500 if fault == "http500" else 503
    return web.json_response({"error": {"message": fault}}, status=status)


def make_app(script: Script) -> web.Application:
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app[SCRIPT] = script
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/_served", served)
    return app


async def served(request: web.Request) -> web.Response:
    return web.json_response({"served": request.app[SCRIPT].served})


class ServerThread:
    """The server on 127.0.0.1 in a thread of its own; ``base_url`` ends in ``/v1``."""

    def __init__(self, script: Script | None = None, port: int = 0) -> None:
        self.script = script or Script()
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    def __enter__(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _start(self) -> None:
        self._runner = web.AppRunner(
            make_app(self.script), access_log=None, shutdown_timeout=1.0, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port, backlog=2048)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    args = parser.parse_args()
    script = Script(latency=args.latency, record=False, fault_rate=args.fault_rate)
    web.run_app(
        make_app(script),
        host="127.0.0.1",
        port=args.port,
        access_log=None,
        backlog=2048,
        print=None,
    )


if __name__ == "__main__":
    main()

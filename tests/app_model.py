"""The model of the small RAG apps that the tracing tests trace: an OpenAI-compatible
``POST /v1/chat/completions`` on loopback, standard library only (it runs in the instrumentations'
own virtual environments as in the suite's).

- A request that offers ``tools`` and carries no tool result yet is answered with a call of the
  first tool, its first string parameter set to the last user message (an agent's retrieval).
- Otherwise the reply is :func:`answer_for` of the last user message: a fixed sentence per
  question, so a test knows what the app received.
- ``"stream": true`` is answered as server-sent events, one chunk per word, then ``[DONE]``.
- ``GET /v1/models`` lists the one model; ``GET /_served`` says how many completions were served.

Run it alone with ``python tests/app_model.py --port 8199``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "modelo-rag-local"


def answer_for(question: str) -> str:
    """The app's answer to a question: the same every time."""
    q = question.lower()
    if "arrepend" in q or "desist" in q:
        return "O prazo de arrependimento é de 7 dias a partir do recebimento do produto."
    if "multa" in q:
        return "A multa por atraso é de 2% sobre o valor da parcela."
    if "garantia" in q:
        return "A garantia legal de produtos duráveis é de 90 dias."
    return "Não encontrei a resposta nos documentos."


def _last_user(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _tool_call(tool: dict[str, Any], question: str) -> dict[str, Any]:
    function = tool.get("function") or {}
    properties = (function.get("parameters") or {}).get("properties") or {}
    name = next((k for k, v in properties.items() if v.get("type") == "string"), "query")
    return {
        "id": f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": function.get("name", "buscar"),
                     "arguments": json.dumps({name: question}, ensure_ascii=False)},
    }  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *_: Any) -> None:
        pass

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        elif self.path == "/_served":
            self._json(200, {"served": self.server.served})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        messages = request.get("messages") or []
        question = _last_user(messages)
        tools = request.get("tools") or []
        answered = any(m.get("role") == "tool" for m in messages)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if tools and not answered:
            message["tool_calls"] = [_tool_call(tools[0], question)]
            finish = "tool_calls"
        else:
            message["content"] = answer_for(question)
            finish = "stop"
        with self.server.lock:
            self.server.served += 1
        created = int(time.time())
        ident = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        usage = {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
        if not request.get("stream"):
            self._json(200, {
                "id": ident, "object": "chat.completion", "created": created,
                "model": request.get("model") or MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            })  # fmt: skip
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def event(delta: dict[str, Any], reason: str | None = None, **extra: Any) -> None:
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": created,
                     "model": request.get("model") or MODEL,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": reason}], **extra}  # fmt: skip
            self.wfile.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())

        event({"role": "assistant", "content": ""})
        if message.get("tool_calls"):
            call = message["tool_calls"][0]
            event({"tool_calls": [{"index": 0, **call}]})
        else:
            words = str(message["content"]).split(" ")
            for n, word in enumerate(words):
                event({"content": word + (" " if n < len(words) - 1 else "")})
        event({}, finish)
        if (request.get("stream_options") or {}).get("include_usage"):
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": created,
                     "model": request.get("model") or MODEL, "choices": [], "usage": usage}  # fmt: skip
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.lock = threading.Lock()
        self.served = 0


class AppModel:
    """``with AppModel() as model:`` serves on ``model.base_url`` (``http://127.0.0.1:PORT/v1``)
    from a thread."""

    def __init__(self, port: int = 0) -> None:
        self._server = _Server(port)
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def served(self) -> int:
        return self._server.served

    def __enter__(self) -> AppModel:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description="the tracing tests' app model")
    parser.add_argument("--port", type=int, default=8199)
    args = parser.parse_args()
    server = _Server(args.port)
    print(f"app model on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""A real HTTP server speaking the OpenAI chat-completions protocol, scripted by the test.

``OpenAIStub`` binds ``127.0.0.1`` on a free port and serves, from a thread,

* ``POST /v1/chat/completions``: the next scripted answer, in OpenAI's JSON shape with ``usage``;
* ``POST /v1/embeddings``: a bag-of-words vector per input (``embedding_dim`` wide, each word
  hashed to one coordinate), so texts that share words are near each other; it honours
  ``dimensions``; a model named ``missing`` answers 404;
* ``GET /v1/models``: one model.

Script it with a queue of answers (``push``) or a function ``request_json -> answer``. An answer is

* a ``str``: the completion content (any text: JSON or not);
* a ``Reply``: content plus token counts, finish reason, an extra delay;
* a ``Fail``: an HTTP status with an error body (429, 500...), or a 200 whose body is not JSON.

Helpers build the usual faults: ``delay(s, then)``, ``rate_limited()``, ``server_error()``,
``garbage_body()``. The stub records every request body and header set, counts requests and the
largest number in flight at once, and can add a fixed latency to every call (for concurrency tests).

Example:
    with OpenAIStub(['{"ok": true}']) as stub:
        client = openai.OpenAI(base_url=stub.url, api_key="not-needed")
        ...
        assert stub.count == 1
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

STUB_MODEL = "stub-model"


@dataclass(frozen=True)
class Reply:
    """A successful completion."""

    content: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    delay_s: float = 0.0


@dataclass(frozen=True)
class Fail:
    """An HTTP failure, or a 200 with a body that is not JSON (``status=200, body=...``)."""

    status: int = 500
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    echo_auth: bool = False
    """Put the request's Authorization header in the error body (a server that leaks it)."""


Answer = str | Reply | Fail
Script = Callable[[dict[str, Any]], Answer]


def delay(seconds: float, then: str = "{}") -> Reply:
    """Answer ``then`` after ``seconds`` (longer than the client's timeout: a timeout)."""
    return Reply(then, delay_s=seconds)


def rate_limited(retry_after: float | None = None) -> Fail:
    """HTTP 429, optionally with a ``Retry-After`` header (seconds)."""
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return Fail(429, _error_body("Rate limit reached", "rate_limit_exceeded"), headers)


def server_error(status: int = 500) -> Fail:
    """An HTTP 5xx."""
    return Fail(status, _error_body("The server had an error", "server_error"))


def http_error(status: int, message: str = "error", *, echo_auth: bool = False) -> Fail:
    """Any HTTP error status with an OpenAI-shaped error body."""
    return Fail(status, _error_body(message, "invalid_request_error"), echo_auth=echo_auth)


def garbage_body(text: str = "<html>upstream hiccup</html>") -> Fail:
    """HTTP 200 with ``Content-Type: application/json`` and a body that is not JSON."""
    return Fail(200, text)


def _error_body(message: str, kind: str) -> str:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": kind}})


def _count_tokens(text: str) -> int:
    return len(text.split())


GATHER_TIMEOUT_S = 10.0
"""How long a request waits for ``OpenAIStub.gather`` requests to be in flight at once."""


class OpenAIStub:
    """The scripted server; start it with ``with`` or ``start()``, stop it with ``close()``.

    Args:
        answers: Answers served in order, or a function from the request JSON to an answer.
        default: Served when the queue is empty; ``None`` answers HTTP 500 "no scripted answer".
        latency_s: Extra time every chat request takes, inside the in-flight window.
        gather: Chat requests wait inside the in-flight window until this many have been in flight
            at once (at most ``GATHER_TIMEOUT_S``): a test of a concurrency level sees it reached
            however slowly a loaded machine starts the requests.
        model: The model id ``/v1/models`` lists.
        embedding_dim: Width of the vectors ``/v1/embeddings`` returns.
    """

    def __init__(
        self,
        answers: Iterable[Answer] | Script | None = None,
        *,
        default: Answer | None = None,
        latency_s: float = 0.0,
        gather: int = 0,
        model: str = STUB_MODEL,
        embedding_dim: int = 32,
    ) -> None:
        self._script: Script | None = answers if callable(answers) else None
        self._queue: deque[Answer] = deque() if callable(answers) else deque(answers or ())
        self.default = default
        self.latency_s = latency_s
        self.gather = gather
        self._budget: int | None = None  # chat requests that may still be answered (None: all)
        self.model = model
        self.embedding_dim = embedding_dim
        self.embedding_requests: list[dict[str, Any]] = []
        """JSON bodies of the embeddings requests, in arrival order."""
        self.requests: list[dict[str, Any]] = []
        """JSON bodies of the chat requests, in arrival order."""
        self.headers: list[dict[str, str]] = []
        """Headers of the chat requests (lower-case names), in arrival order."""
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._gathered = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ scripting
    def push(self, *answers: Answer) -> Self:
        """Append answers to the queue."""
        with self._lock:
            self._queue.extend(answers)
        return self

    @property
    def count(self) -> int:
        """Chat requests received so far."""
        with self._lock:
            return len(self.requests)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def reset(self) -> None:
        """Forget requests, headers, counters and queued answers."""
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self._queue.clear()
            self.max_in_flight = 0

    def hold(self, answers: int = 0) -> None:
        """Answer only ``answers`` more chat requests; later ones wait (received and in flight)
        until ``release`` or ``unhold``: a test can stop a flow at its next LLM call."""
        with self._lock:
            self._budget = answers
            self._gathered.notify_all()

    def release(self, answers: int = 1) -> None:
        """Let ``answers`` more held requests be answered."""
        with self._lock:
            self._budget = (self._budget or 0) + answers
            self._gathered.notify_all()

    def unhold(self) -> None:
        """Answer every request again, the held ones first."""
        with self._lock:
            self._budget = None
            self._gathered.notify_all()

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the stub is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for an OpenAI client: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.stub = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-stub",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        self.unhold()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ serving
    def _next_answer(self, body: dict[str, Any]) -> Answer:
        if self._script is not None:
            return self._script(body)
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.default is not None:
            return self.default
        return Fail(500, _error_body("stub: no scripted answer left", "stub_exhausted"))

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        prompt_text = " ".join(str(m.get("content") or "") for m in body.get("messages", []))
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else _count_tokens(prompt_text)
        )
        completion_tokens = (
            reply.completion_tokens
            if reply.completion_tokens is not None
            else _count_tokens(reply.content or "")
        )
        with self._lock:
            n = len(self.requests)
        return {
            "id": f"chatcmpl-stub-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or any(not t for t in texts):
            return 400, json.loads(_error_body("input must be non-empty strings", "invalid"))
        if body.get("model") == "missing":
            return 404, json.loads(_error_body("model 'missing' not found", "model_not_found"))
        dim = int(body.get("dimensions") or self.embedding_dim)
        data = [
            {"object": "embedding", "index": i, "embedding": bag_of_words(str(t), dim)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(_count_tokens(str(t)) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage}


def bag_of_words(text: str, dim: int) -> list[float]:
    """Each lower-cased word adds 1 to the coordinate its hash picks (plus a constant, so that no
    vector is all zeros)."""
    vector = [0.0] * dim
    vector[0] = 0.1
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    return vector


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    stub: OpenAIStub

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is expected here; nothing else is printed either,
        # the tests look at the client side.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self) -> None:
        stub = self.server.stub
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            models = {
                "object": "list",
                "data": [{"id": stub.model, "object": "model", "created": 0, "owned_by": "stub"}],
            }
            self._send(200, json.dumps(models))
        else:
            self._send(404, _error_body(f"no route {self.path}", "not_found"))

    def do_POST(self) -> None:
        stub = self.server.stub
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") in ("/v1/embeddings", "/embeddings"):
            body = json.loads(raw or b"{}")
            with stub._lock:
                stub.embedding_requests.append(body)
            status, payload = stub._embeddings(body)
            self._send(status, json.dumps(payload))
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, _error_body(f"no route {self.path}", "not_found"))
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, _error_body("request body is not JSON", "invalid_request_error"))
            return
        with stub._lock:
            stub.requests.append(body)
            stub.headers.append({k.lower(): v for k, v in self.headers.items()})
            stub._in_flight += 1
            stub.max_in_flight = max(stub.max_in_flight, stub._in_flight)
            stub._gathered.notify_all()
            if stub.gather:
                stub._gathered.wait_for(
                    lambda: stub.max_in_flight >= stub.gather, timeout=GATHER_TIMEOUT_S
                )
            stub._gathered.wait_for(lambda: stub._budget is None or stub._budget > 0)
            if stub._budget is not None:
                stub._budget -= 1
        try:
            stub._sleep(stub.latency_s)
            answer = stub._next_answer(body)
            if isinstance(answer, str):
                answer = Reply(answer)
            stub._sleep(answer.delay_s)
            if isinstance(answer, Fail):
                text = answer.body if answer.body is not None else _error_body("error", "error")
                if answer.echo_auth:
                    text = _error_body(
                        f"Incorrect API key provided: {self.headers.get('Authorization', '')}",
                        "invalid_api_key",
                    )
                self._send(answer.status, text, answer.headers)
            else:
                self._send(200, json.dumps(stub._completion(body, answer)))
        finally:
            with stub._lock:
                stub._in_flight -= 1

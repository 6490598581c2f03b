"""The JSON HTTP API under ``/v1`` (described by ``/openapi.json``, see ``openapi.py``).

Every handler reads the request's :class:`~.auth.Access` (set by the auth middleware) and passes
it down, so what a handler can reach is bounded by the token before any store is opened.
Errors come back as ``{"error": "..."}`` with 400 (a bad request), 404 (nothing of that name the
token may see), 401 (no or an unknown token), 409 (the home is busy with a run) or 503.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from skillstream.errors import InputError, SkillstreamError
from skillstream.server import reads
from skillstream.server.auth import Access, Denied
from skillstream.server.home import Busy, ServedHome, dumps
from skillstream.storage.lock import HomeBusyError

MAX_K = 100
"""Most hits one search request returns."""

MAX_BODY = 4 * 1024 * 1024
"""Largest request body accepted (bytes)."""


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(dumps(obj), status_code=status, media_type="application/json")


def error(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


def access_of(request: Request) -> Access:
    access: Access = request.scope["state"]["access"]
    return access


def handled(fn: Callable[[Request], Any]) -> Callable[[Request], Response]:
    """A sync handler whose skillstream errors become JSON error answers."""

    @functools.wraps(fn)
    def wrapped(request: Request) -> Response:
        try:
            out = fn(request)
        except Denied as e:
            return error(e.status, str(e))
        except Busy as e:
            return error(503, str(e))
        except InputError as e:
            text = str(e)
            return error(404 if text.startswith("no ") else 400, text)
        except HomeBusyError as e:
            return error(409, str(e))
        except SkillstreamError as e:
            return error(500, f"{type(e).__name__}: {e}")
        return out if isinstance(out, Response) else json_response(out)

    return wrapped


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as e:
        raise InputError(f"{name} must be a whole number, got {raw!r}") from e
    if not low <= value <= high:
        raise InputError(f"{name} must be between {low} and {high}, got {value}")
    return value


def time_param(request: Request, name: str) -> datetime | None:
    raw = request.query_params.get(name)
    if not raw:
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError as e:
        raise InputError(f"{name} must be an ISO 8601 date or time, got {raw!r}") from e


def flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in ("1", "true", "yes", "on")


def read_json(request: Request) -> Any:
    """The request's JSON body (read in the handler's thread)."""
    import anyio.from_thread

    body: bytes = anyio.from_thread.run(request.body)
    if len(body) > MAX_BODY:
        raise InputError(f"the body is larger than {MAX_BODY} bytes")
    try:
        return json.loads(body or b"null")
    except json.JSONDecodeError as e:
        raise InputError(f"the body is not JSON: {e}") from e


def routes(home: ServedHome) -> list[Route]:
    """The API's routes over ``home``."""

    @handled
    def search(request: Request) -> Any:
        q = request.query_params
        hits = home.search(
            access_of(request),
            q.get("q", ""),
            owner=q.get("owner") or None,
            k=int_param(request, "k", 10, 1, MAX_K),
            strategy=q.get("strategy", "hybrid"),
            agent=q.get("agent") or None,
            session=q.get("session") or None,
        )
        return {"hits": hits}

    @handled
    def add(request: Request) -> Any:
        body = read_json(request)
        flush = flag(request, "flush")
        if isinstance(body, dict):
            flush = bool(body.get("flush", flush))
            body = body.get("messages")
        return home.add(access_of(request), body, flush=flush)

    @handled
    def owners(request: Request) -> Any:
        return {"owners": home.read(reads.owners, access_of(request)) or []}

    @handled
    def memories(request: Request) -> Any:
        q = request.query_params
        found = home.read(
            reads.memories,
            access_of(request),
            request.path_params["owner"],
            filters={f: q.get(f, "") for f in reads.FILTERS},
            since=time_param(request, "since"),
            until=time_param(request, "until"),
            limit=int_param(request, "limit", 50, 1, reads.PAGE),
            offset=int_param(request, "offset", 0, 0, 10**9),
        )
        return {"memories": found or []}

    @handled
    def memory(request: Request) -> Any:
        found = home.read(reads.memory, access_of(request), request.path_params["id"])
        if found is None:
            raise InputError(f"no memory {request.path_params['id']!r}")
        return found

    @handled
    def history(request: Request) -> Any:
        events = home.read(reads.history, access_of(request), request.path_params["id"])
        if events is None:
            raise InputError(f"no memory {request.path_params['id']!r}")
        return {"memory_id": request.path_params["id"], "events": events}

    @handled
    def contradictions(request: Request) -> Any:
        found = home.read(
            reads.contradictions,
            access_of(request),
            request.query_params.get("owner") or None,
            every=flag(request, "all"),
        )
        return {"contradictions": found or []}

    @handled
    def skills(request: Request) -> Any:
        owner = request.query_params.get("owner") or None
        return {"task_skills": home.skills(access_of(request), owner, flag(request, "all"))}

    @handled
    def skill(request: Request) -> Any:
        p = request.path_params
        return home.skill(access_of(request), p["owner"], p["name"], use=True)

    @handled
    def feedback(request: Request) -> Any:
        body = read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("success"), bool):
            raise InputError('send {"success": true or false, "note": "..."}')
        p = request.path_params
        return home.feedback(
            access_of(request), p["owner"], p["name"], body["success"], str(body.get("note", ""))
        )

    @handled
    def stats(request: Request) -> Any:
        return home.read(reads.stats, access_of(request)) or {"memories": 0}

    return [
        Route("/v1/search", search, methods=["GET"], name="search"),
        Route("/v1/messages", add, methods=["POST"], name="add"),
        Route("/v1/owners", owners, methods=["GET"], name="owners"),
        Route("/v1/owners/{owner}/memories", memories, methods=["GET"], name="memories"),
        Route("/v1/memories/{id}", memory, methods=["GET"], name="memory"),
        Route("/v1/memories/{id}/history", history, methods=["GET"], name="history"),
        Route("/v1/contradictions", contradictions, methods=["GET"], name="contradictions"),
        Route("/v1/task-skills", skills, methods=["GET"], name="task_skills"),
        Route("/v1/task-skills/{owner}/{name}", skill, methods=["GET"], name="task_skill"),
        Route(
            "/v1/task-skills/{owner}/{name}/feedback",
            feedback,
            methods=["POST"],
            name="task_skill_feedback",
        ),
        Route("/v1/stats", stats, methods=["GET"], name="stats"),
    ]

"""The OpenAPI 3.1 description of the JSON API (served at ``/openapi.json``).

Written out here rather than generated, so that it says what each answer holds; a test calls
every path it lists and checks that the server has exactly these paths.
"""

from __future__ import annotations

from typing import Any

from skillstream import __version__


def _param(name: str, where: str, doc: str, kind: str = "string", required: bool = False) -> Any:
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "description": doc,
        "schema": {"type": kind},
    }


def _ok(doc: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "description": doc,
        "content": {"application/json": {"schema": schema or {"type": "object"}}},
    }


OWNER_Q = _param("owner", "query", "The owner; a token limited to one owner defaults to it.")
OWNER_P = _param("owner", "path", "The owner id.")
NAME_P = _param("name", "path", "The task skill's name.")
ID_P = _param("id", "path", "The memory's id.")
ALL_Q = _param("all", "query", "true: every one, not only the open or served ones.", "boolean")

HIT = {
    "type": "object",
    "required": ["id", "text", "score", "owner_id"],
    "properties": {
        "id": {"type": "string"},
        "text": {"type": "string"},
        "score": {"type": "number", "description": "The rank score (relevance and recency)."},
        "relevance": {"type": "number"},
        "owner_id": {"type": "string"},
        "kind": {"type": "string"},
        "memory_type": {"type": "string"},
        "status": {"type": "string"},
        "confidence": {"type": "number"},
        "event_ts": {"type": ["string", "null"], "format": "date-time"},
    },
}

MESSAGE = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {
        "role": {"type": "string", "enum": ["user", "assistant", "system", "tool"]},
        "content": {"type": "string"},
        "user_id": {"type": "string", "description": "The owner (default: the token's one)."},
        "conversation_id": {"type": "string"},
        "session_id": {"type": "string"},
        "message_id": {"type": "string"},
        "timestamp": {"type": "string", "format": "date-time"},
    },
}

ERRORS = {
    "400": {"description": "A bad request; `error` says what to change."},
    "401": {"description": "No token, or an unknown one."},
    "404": {"description": "Nothing of that name that the token may see."},
    "503": {"description": "Another process (a run) holds the home's catalog."},
}


def spec() -> dict[str, Any]:
    """The OpenAPI document."""

    def op(summary: str, params: list[Any], ok: Any, **more: Any) -> dict[str, Any]:
        return {
            "summary": summary,
            "parameters": params,
            "responses": {"200": ok, **ERRORS},
            **more,
        }

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "skillstream",
            "version": __version__,
            "description": "Memories and task skills of one skillstream home.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Hit": HIT, "Message": MESSAGE},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/healthz": {"get": op("Liveness", [], _ok("ok"), security=[])},
            "/v1/search": {
                "get": op(
                    "Search an owner's memories (hybrid keyword and vector search, ranked as "
                    "`skillstream search` ranks).",
                    [
                        _param("q", "query", "What to look for.", required=True),
                        OWNER_Q,
                        _param("k", "query", "Hits wanted (1 to 100, default 10).", "integer"),
                        _param("strategy", "query", "hybrid (default), semantic or keyword."),
                        _param("agent", "query", "The reading agent (its scope policy)."),
                        _param("session", "query", "The reader's session."),
                    ],
                    _ok(
                        "Hits, best first.",
                        {
                            "type": "object",
                            "properties": {
                                "hits": {
                                    "type": "array",
                                    "items": {"$ref": "#/components/schemas/Hit"},
                                }
                            },
                        },
                    ),
                )
            },
            "/v1/messages": {
                "post": op(
                    "Add messages, as `Home.add` does: spans close by the token budget, a session "
                    "change or a quiet gap; `flush` closes them at the end of the call.",
                    [_param("flush", "query", "Close the open spans now.", "boolean")],
                    _ok("What the call stored: messages, refused, spans, memory_ids, held."),
                    requestBody={
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "oneOf": [
                                        {
                                            "type": "array",
                                            "items": {"$ref": "#/components/schemas/Message"},
                                        },
                                        {
                                            "type": "object",
                                            "properties": {
                                                "messages": {
                                                    "type": "array",
                                                    "items": {
                                                        "$ref": "#/components/schemas/Message"
                                                    },
                                                },
                                                "flush": {"type": "boolean"},
                                            },
                                        },
                                    ]
                                }
                            }
                        },
                    },
                )
            },
            "/v1/owners": {"get": op("Owners and their memory counts.", [], _ok("owners"))},
            "/v1/owners/{owner}/memories": {
                "get": op(
                    "An owner's memories, newest event first.",
                    [
                        OWNER_P,
                        _param("kind", "query", "fact, event, preference, topic, ..."),
                        _param("memory_type", "query", "The memory type."),
                        _param("status", "query", "generated, activated, archived, ..."),
                        _param("scope", "query", "private, agent, session, shared."),
                        _param("since", "query", "Event time from (ISO 8601)."),
                        _param("until", "query", "Event time before (ISO 8601)."),
                        _param("limit", "query", "Rows (1 to 200, default 50).", "integer"),
                        _param("offset", "query", "Rows to skip.", "integer"),
                    ],
                    _ok("memories"),
                )
            },
            "/v1/memories/{id}": {"get": op("One memory.", [ID_P], _ok("The memory."))},
            "/v1/memories/{id}/history": {
                "get": op("A memory's lifecycle events, oldest first.", [ID_P], _ok("events"))
            },
            "/v1/contradictions": {
                "get": op("Open contradictions.", [OWNER_Q, ALL_Q], _ok("contradictions"))
            },
            "/v1/task-skills": {
                "get": op(
                    "Task skills with their state and reliability (served ones unless all).",
                    [OWNER_Q, ALL_Q],
                    _ok("task_skills"),
                )
            },
            "/v1/task-skills/{owner}/{name}": {
                "get": op(
                    "One task skill's SKILL.md and versions; counts as a use.",
                    [OWNER_P, NAME_P],
                    _ok("The task skill."),
                )
            },
            "/v1/task-skills/{owner}/{name}/feedback": {
                "post": op(
                    "Whether using a task skill worked; a skill that keeps failing is retired.",
                    [OWNER_P, NAME_P],
                    _ok("The skill's version, state and reliability."),
                    requestBody={
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["success"],
                                    "properties": {
                                        "success": {"type": "boolean"},
                                        "note": {"type": "string"},
                                    },
                                }
                            }
                        },
                    },
                )
            },
            "/v1/stats": {"get": op("Counts of memories, spans and open spans.", [], _ok("stats"))},
        },
    }

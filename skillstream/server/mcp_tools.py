"""The MCP server for task skills and memories (``skillstream mcp``), built on the ``mcp`` package.

It needs the SDK's 2.x line (``mcp.server.mcpserver.MCPServer``; the ``mcp`` extra pins
``mcp>=2.3,<3``). Tools, all scoped to one owner:

* ``skill_list``: names, descriptions, states and reliability of the owner's task skills (the
  index an agent keeps in its prompt; progressive disclosure); active ones unless it asks for more;
* ``skill_view``: one task skill's ``SKILL.md``, its file list and version; counts as a use;
* ``skill_save``: create or replace a task skill from a name, a description and a markdown body
  (sections such as ``## Procedure``, ``## Pitfalls``, ``## Verification``); a new version;
* ``skill_patch``: replace or append one section; a new version;
* ``skill_delete``: soft delete (history and packages stay);
* ``skill_search``: task skills by name, description and triggers, active ones unless it asks for
  more, ranked by relevance and reliability;
* ``skill_feedback``: whether using a task skill worked (its reliability; a skill that keeps
  failing is retired);
* ``memory_search``: hybrid search over the owner's memories (task skills come back too, marked
  ``memory_type`` ``SkillMemory``);
* ``memory_add``: add messages of a conversation (spans, extraction, task skills), as the
  owner.

Errors (an unknown name, an invalid section, a home with nothing stored yet, a bad message) come
back as tool errors with the message saying what to do, never as an empty result.

``build_server`` gives the server object: ``skillstream mcp`` runs it over stdio for one owner;
``skillstream serve`` mounts it over streamable HTTP, where each request names its owner and the
caller's token decides whether it may (``owner`` is then a function of the request's context).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import typing
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from skillstream.distill.package import (
    render_skill_md,
    skill_from_files,
    skill_md_text,
    validate_skill_md,
)
from skillstream.errors import InputError, MissingExtraError, SkillstreamError
from skillstream.services.task_skills import TaskSkillAPI
from skillstream.settings import Settings, is_remote, local_path

INSTRUCTIONS = (
    "Task skills are reusable procedures distilled from this user's past conversations. Call "
    "skill_list to see what exists, skill_view to load one before doing that kind of task, and "
    "skill_save or skill_patch after solving something new or learning a pitfall."
)


_OWNER: contextvars.ContextVar[str] = contextvars.ContextVar("skillstream_mcp_owner")
"""The owner of the tool call running in this thread."""


def build_server(
    settings: Settings,
    owner: str | Callable[[Any], str],
    *,
    api: TaskSkillAPI | None = None,
    name: str = "skillstream-task-skills",
) -> Any:
    """An ``MCPServer`` with the task-skill and memory tools.

    Args:
        settings: The home.
        owner: The owner of every call, or a function of a call's MCP ``Context`` that gives it
            (and raises ``InputError`` for an owner the caller may not touch).
        api: The task-skill service to use (default: one over ``settings``).
        name: The server's name in the protocol.

    Raises:
        MissingExtraError: when the ``mcp`` package is not installed.
    """
    try:
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise MissingExtraError("mcp", "mcp") from e

    resolve: Callable[[Any], str] = owner if callable(owner) else (lambda ctx: owner)

    def tool(fn: Any) -> Any:
        """Register ``fn``; skillstream's own errors reach the model as tool errors with text.

        The registered function takes the call's ``Context`` too (the SDK fills it in and keeps
        it out of the tool's schema), from which the call's owner is resolved first."""

        @functools.wraps(fn)
        def wrapped(*args: Any, ctx: Any, **kwargs: Any) -> Any:
            try:
                token = _OWNER.set(resolve(ctx))
                try:
                    return fn(*args, **kwargs)
                finally:
                    _OWNER.reset(token)
            except SkillstreamError as e:
                raise ToolError(str(e)) from e
            except (ValueError, OSError) as e:  # a store that is missing or unreadable
                raise ToolError(f"{fn.__name__} failed: {type(e).__name__}: {e}") from e

        sig = inspect.signature(fn)
        extra = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
        wrapped.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[*sig.parameters.values(), extra]
        )
        wrapped.__annotations__ = {**typing.get_type_hints(fn), "ctx": Context}
        server.add_tool(wrapped)
        return wrapped

    def who() -> str:
        return _OWNER.get()

    api = api or TaskSkillAPI(settings, owner=None if callable(owner) else owner)
    server = MCPServer(name, instructions=INSTRUCTIONS)

    @tool
    def skill_list(include_all: bool = False) -> list[dict[str, Any]]:
        """List the user's task skills: name, one-line description, state and reliability of
        each. Only active skills unless include_all (candidates, stale, retired, archived)."""
        return [
            {k: s[k] for k in ("name", "description", "state", "reliability")}
            for s in api.list(who(), include_archived=include_all)
        ]

    @tool
    def skill_view(name: str) -> dict[str, Any]:
        """Load a task skill's full SKILL.md (procedure, pitfalls, preferences, checks) by name."""
        skill = api.show(name, who())
        return {
            "name": skill.name,
            "version": skill.version,
            "times_used": skill.times_used,
            "skill_md": render_skill_md(skill),
            "scripts": skill.scripts,
            "references": sorted(skill.references),
            "package_url": skill.package_url,
        }

    @tool
    def skill_save(name: str, description: str, content: str) -> dict[str, Any]:
        """Create or replace a task skill. `content` is the markdown body with sections such as
        '## Procedure' (numbered steps), '## Pitfalls and experience', '## User preferences',
        '## Tools', '## Verification'."""
        text = skill_md_text(name, description, content)
        problems = validate_skill_md(text, name)
        if problems:
            raise InputError("cannot save: " + "; ".join(problems))
        skill = api.save(skill_from_files({"SKILL.md": text.encode("utf-8")}, who()))
        return {"name": skill.name, "version": skill.version, "package_url": skill.package_url}

    @tool
    def skill_patch(name: str, section: str, text: str, append: bool = False) -> dict[str, Any]:
        """Replace (or with append=true, extend) one section of a task skill: description,
        triggers, procedure, pitfalls, preferences, examples, tools, verification, or a file
        'scripts/<name>' / 'references/<name>'."""
        skill = api.patch(name, section, text, who(), append=append)
        return {"name": skill.name, "version": skill.version, "package_url": skill.package_url}

    @tool
    def skill_delete(name: str) -> dict[str, Any]:
        """Delete a task skill (soft: its history and packages are kept)."""
        skill = api.delete(name, who())
        return {"name": skill.name, "version": skill.version, "status": skill.status}

    @tool
    def skill_search(query: str, k: int = 5, include_all: bool = False) -> list[dict[str, Any]]:
        """Find the user's task skills for a task: name, description, score, state and
        reliability, best first. Only active skills unless include_all."""
        _require_home(settings)
        states = None if not include_all else ("candidate", "active", "stale", "retired")
        return [
            {k: h[k] for k in ("name", "description", "score", "state", "reliability")}
            for h in api.search(query, who(), k, states=states)
        ]

    @tool
    def skill_feedback(name: str, success: bool, note: str = "") -> dict[str, Any]:
        """Report whether following a task skill worked (success true or false, and a short
        note). A skill that keeps failing is retired and no longer offered."""
        got = api.feedback(name, success, note, who())
        return {k: got[k] for k in ("name", "version", "state", "reliability", "change")}

    @tool
    def memory_search(query: str, k: int = 5) -> list[dict[str, Any]]:
        """Search the user's memories (facts, events, preferences, plans) by meaning and keyword.
        Task skills come back too, with memory_type 'SkillMemory' (load them with skill_view)."""
        from skillstream.services.search import search_memories

        _require_home(settings)
        hits = search_memories(settings, query, owner=who(), k=k)
        return [
            {
                "id": h.get("id"),
                "text": h.get("text"),
                "kind": h.get("kind"),
                "memory_type": h.get("memory_type"),
                "score": h.get("score"),
                "event_ts": h["event_ts"].isoformat() if h.get("event_ts") else None,
            }
            for h in hits
        ]

    @tool
    def memory_add(
        messages: list[dict[str, Any]], conversation_id: str = "mcp", flush: bool = False
    ) -> dict[str, Any]:
        """Remember messages of a conversation, one or many at a time. Each message needs 'role'
        (user or assistant) and 'content'; 'timestamp' (ISO 8601, default now), 'session_id'
        and 'message_id' are optional. Memories are extracted span by span: a span stays open
        (held, nothing lost) until its token budget fills, the session changes or the
        conversation has been quiet for the idle gap; 'held' says how many messages wait.
        Set flush to close this conversation's open span at the end of the call and make its
        memories searchable at once."""
        from skillstream.api import Home

        if not messages:
            raise InputError("memory_add needs at least one message")
        now = datetime.now(UTC).isoformat()
        records = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                raise InputError(f"message {i} is not an object with 'role' and 'content'")
            records.append(
                {
                    **m,
                    "conversation_id": m.get("conversation_id") or conversation_id,
                    "user_id": who(),
                    "timestamp": m.get("timestamp") or now,
                }
            )
        added = Home(settings, who()).add(records, flush=flush)
        if added.dead_letters and not added.messages:
            raise InputError("no message could be stored: " + "; ".join(added.refused))
        return added.as_dict()

    return server


def _require_home(settings: Settings) -> None:
    """A read of a home where nothing was stored yet is an error the agent can act on."""
    home = settings.storage.home
    if not is_remote(home) and not local_path(settings.storage.lancedb).exists():
        raise InputError(
            f"nothing is stored in {home} yet: add messages with memory_add, or run "
            "'skillstream run' on chat logs first"
        )

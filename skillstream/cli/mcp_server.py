"""The MCP server for task skills (``skillstream mcp``), built on the ``mcp`` package (2.x).

Tools, all scoped to one owner:

* ``skill_list``: names and descriptions of the owner's task skills (the index an agent keeps in
  its prompt; progressive disclosure);
* ``skill_view``: one task skill's ``SKILL.md``, its file list and version; counts as a use;
* ``skill_save``: create or replace a task skill from a name, a description and a markdown body
  (sections such as ``## Procedure``, ``## Pitfalls``, ``## Verification``); a new version;
* ``skill_patch``: replace or append one section; a new version;
* ``skill_delete``: soft delete (history and packages stay);
* ``memory_search``: hybrid search over the owner's memories.

Errors (an unknown name, an invalid section) come back as tool errors with the message saying what
to do. The server talks over stdio; ``build_server`` gives the server object for in-process use.
"""

from __future__ import annotations

import functools
from typing import Any

import yaml

from skillstream.distill.package import render_skill_md, skill_from_files, validate_skill_md
from skillstream.errors import InputError, MissingExtraError, SkillstreamError
from skillstream.services.task_skills import TaskSkillAPI
from skillstream.settings import Settings

INSTRUCTIONS = (
    "Task skills are reusable procedures distilled from this user's past conversations. Call "
    "skill_list to see what exists, skill_view to load one before doing that kind of task, and "
    "skill_save or skill_patch after solving something new or learning a pitfall."
)


def build_server(settings: Settings, owner: str, *, api: TaskSkillAPI | None = None) -> Any:
    """An ``MCPServer`` with the task-skill tools for ``owner``.

    Raises:
        MissingExtraError: when the ``mcp`` package is not installed.
    """
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise MissingExtraError("mcp", "mcp") from e

    def tool(fn: Any) -> Any:
        """Register ``fn``; skillstream's own errors reach the model as tool errors with text."""

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except SkillstreamError as e:
                raise ToolError(str(e)) from e

        server.add_tool(wrapped)
        return wrapped

    api = api or TaskSkillAPI(settings, owner=owner)
    server = MCPServer("skillstream-task-skills", instructions=INSTRUCTIONS)

    @tool
    def skill_list() -> list[dict[str, Any]]:
        """List the user's task skills: name and one-line description of each."""
        return [{"name": s["name"], "description": s["description"]} for s in api.list(owner)]

    @tool
    def skill_view(name: str) -> dict[str, Any]:
        """Load a task skill's full SKILL.md (procedure, pitfalls, preferences, checks) by name."""
        skill = api.show(name, owner)
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
        front = yaml.safe_dump(
            {"name": name, "description": description},
            sort_keys=False,
            allow_unicode=True,
            width=10_000,
        ).strip()
        text = f"---\n{front}\n---\n\n{content.strip()}\n"
        problems = validate_skill_md(text, name)
        if problems:
            raise InputError("cannot save: " + "; ".join(problems))
        skill = api.save(skill_from_files({"SKILL.md": text.encode("utf-8")}, owner))
        return {"name": skill.name, "version": skill.version, "package_url": skill.package_url}

    @tool
    def skill_patch(name: str, section: str, text: str, append: bool = False) -> dict[str, Any]:
        """Replace (or with append=true, extend) one section of a task skill: description,
        triggers, procedure, pitfalls, preferences, examples, tools, verification, or a file
        'scripts/<name>' / 'references/<name>'."""
        skill = api.patch(name, section, text, owner, append=append)
        return {"name": skill.name, "version": skill.version, "package_url": skill.package_url}

    @tool
    def skill_delete(name: str) -> dict[str, Any]:
        """Delete a task skill (soft: its history and packages are kept)."""
        skill = api.delete(name, owner)
        return {"name": skill.name, "version": skill.version, "status": skill.status}

    @tool
    def memory_search(query: str, k: int = 5) -> list[dict[str, Any]]:
        """Search the user's memories (facts, events, preferences, plans) by meaning and keyword."""
        from skillstream.services.search import search_memories

        try:
            hits = search_memories(settings, query, owner=owner, k=k)
        except (ValueError, FileNotFoundError):
            return []
        return [
            {
                "text": h.get("text"),
                "kind": h.get("kind"),
                "score": h.get("score"),
                "event_ts": h["event_ts"].isoformat() if h.get("event_ts") else None,
            }
            for h in hits
        ]

    return server

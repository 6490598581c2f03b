"""Read-only pages for people: owners, an owner's memories (search and filters), a memory's
history, contradictions, charts, task skills and the memory-skill bank.

Pages are rendered on the server from the templates in ``templates/`` with Jinja2's autoescaping,
so text from conversations is never markup; charts are inline SVG (``charts.py``) and a task
skill's ``SKILL.md`` is rendered by markdown-it with raw HTML switched off. A page loads nothing
from another host. The only write a page makes is a search's record (as every search does).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from skillstream.errors import InputError
from skillstream.lifecycle.policy import SCOPES
from skillstream.server import charts, reads
from skillstream.server.api_routes import access_of, time_param
from skillstream.server.auth import COOKIE, Denied
from skillstream.server.home import Busy, ServedHome
from skillstream.vocab import MemoryKind, MemoryStatus, MemoryType

NAV = (
    ("/", "Owners"),
    ("/contradictions", "Contradictions"),
    ("/charts", "Charts"),
    ("/skills", "Task skills"),
    ("/memory-skills", "Memory skills"),
)

CHOICES = (
    ("kind", tuple(k.value for k in MemoryKind)),
    ("memory_type", tuple(t.value for t in MemoryType)),
    ("status", tuple(st.value for st in MemoryStatus)),
    ("scope", SCOPES),
)
"""The filter menus of an owner's page (the values the lifecycle writes)."""


def _when(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return "" if value is None else str(value)


@functools.cache
def environment() -> Any:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=select_autoescape(["html"], default=True),
    )
    env.filters["when"] = _when
    return env


def markdown_html(text: str) -> Markup:
    """``SKILL.md`` as HTML, with any raw HTML in it shown as text (markdown-it, no html)."""
    from markdown_it import MarkdownIt

    body = text
    if body.startswith("---"):  # the YAML front matter is shown as code, not parsed as markup
        end = body.find("\n---", 3)
        if end != -1:
            body = f"```yaml\n{body[3:end].strip()}\n```\n" + body[end + 4 :]
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    return Markup(md.render(body))  # noqa: S704 - html is off: every tag of the text is escaped


def changes(event: dict[str, Any]) -> dict[str, Any]:
    """An event with ``changes``: the fields its old and new values differ in, as
    ``(field, was, now)`` (a created memory lists what it was created with)."""

    def parsed(raw: Any) -> dict[str, Any]:
        try:
            value = json.loads(raw) if isinstance(raw, str) and raw else {}
        except json.JSONDecodeError:
            return {"value": raw}
        return value if isinstance(value, dict) else {"value": value}

    old, new = parsed(event.get("old_value")), parsed(event.get("new_value"))
    fields = [k for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
    return {**event, "changes": [(k, old.get(k), new.get(k)) for k in fields]}


def routes(home: ServedHome) -> list[Route]:
    """The pages' routes over ``home``."""

    def page(fn: Callable[[Request], tuple[str, dict[str, Any]] | Response]) -> Any:
        @functools.wraps(fn)
        def wrapped(request: Request) -> Response:
            status = 200
            try:
                out = fn(request)
            except Denied as e:
                if e.status == 401:
                    return RedirectResponse(f"/login?next={quote(request.url.path)}", 303)
                out, status = ("error.html", {"error": str(e)}), e.status
            except Busy as e:
                out, status = ("error.html", {"error": str(e)}), 503
            except InputError as e:
                text = str(e)
                out = ("error.html", {"error": text})
                status = 404 if text.startswith("no ") else 400
            if isinstance(out, Response):
                return out
            name, context = out
            html = (
                environment()
                .get_template(name)
                .render(nav=NAV, here=request.url.path, home=home.settings.storage.home, **context)
            )
            return HTMLResponse(html, status_code=status)

        return wrapped

    @page
    def owners(request: Request) -> Any:
        return "owners.html", {"owners": home.read(reads.owners, access_of(request)) or []}

    @page
    def owner(request: Request) -> Any:
        access = access_of(request)
        name = request.path_params["owner"]
        access.require(name)
        q = request.query_params
        filters = {f: q.get(f, "") for f in reads.FILTERS}
        since, until = time_param(request, "since"), time_param(request, "until")
        query = q.get("q", "").strip()
        if query:
            hits = home.search(access, query, owner=name, k=50)
            rows = [
                h
                for h in hits
                if all(not v or str(h.get(f)) == v for f, v in filters.items())
                and (since is None or (h.get("event_ts") and h["event_ts"] >= since))
                and (until is None or (h.get("event_ts") and h["event_ts"] < until))
            ]
        else:
            rows = (
                home.read(reads.memories, access, name, filters=filters, since=since, until=until)
                or []
            )
        return "owner.html", {
            "owner": name,
            "rows": rows,
            "q": query,
            "filters": filters,
            "choices": CHOICES,
            "since": q.get("since", ""),
            "until": q.get("until", ""),
        }

    @page
    def memory(request: Request) -> Any:
        access = access_of(request)
        mid = request.path_params["id"]

        def both(cat: Any) -> Any:
            return reads.memory(cat, access, mid), reads.history(cat, access, mid)

        found, events = home.read(both) or (None, None)
        if found is None:
            raise InputError(f"no memory {mid!r}")
        return "memory.html", {"m": found, "events": [changes(e) for e in events or []]}

    @page
    def contradictions(request: Request) -> Any:
        every = request.query_params.get("all", "") == "true"
        rows = home.read(reads.contradictions, access_of(request), every=every) or []
        return "contradictions.html", {"rows": rows, "every": every}

    @page
    def charts_page(request: Request) -> Any:
        access = access_of(request)

        def read(cat: Any) -> Any:
            return (
                reads.over_time(cat, access, "status"),
                reads.over_time(cat, access, "memory_type"),
                reads.llm_per_day(cat, access),
                reads.cost(cat, access, home.settings.llm.prices),
            )

        status, kinds, llm, cost = home.read(read) or ([], [], [], None)
        llm = [{**r, "cost": home.cost(r)} for r in llm]
        llm_chart = [
            {"period": r["day"], "series": r["model"], "n": r["cost"]} for r in llm if r["cost"]
        ]
        title = "LLM cost per day"
        if not llm_chart:  # no prices set: the tokens the model read and wrote
            title = "LLM tokens per day (no prices set)"
            llm_chart = [
                {
                    "period": r["day"],
                    "series": r["model"],
                    "n": (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0),
                }
                for r in llm
            ]
        return "charts.html", {
            "by_status": Markup(charts.stacked_bars(status, title="Memories by status")),  # noqa: S704
            "by_type": Markup(charts.stacked_bars(kinds, title="Memories by type")),  # noqa: S704
            "llm": Markup(charts.stacked_bars(llm_chart, title=title)),  # noqa: S704
            "llm_rows": llm,
            "cost": cost,
        }

    @page
    def skills(request: Request) -> Any:
        every = request.query_params.get("all", "") == "true"
        return "skills.html", {
            "rows": home.skills(access_of(request), None, every),
            "every": every,
        }

    @page
    def skill(request: Request) -> Any:
        p = request.path_params
        found = home.skill(access_of(request), p["owner"], p["name"], use=False)
        return "skill.html", {"s": found, "html": markdown_html(found["skill_md"])}

    @page
    def memory_skills(request: Request) -> Any:
        rows = home.read(reads.memory_skill_bank) or []
        controller, points = home.controller()
        curve = charts.line(
            [(p.get("update", i), p.get("reward", 0.0)) for i, p in enumerate(points)],
            title="Mean reward per PPO update",
            x_label="update",
            y_label="mean reward",
        )
        return "memory_skills.html", {
            "rows": rows,
            "controller": controller,
            "curve": Markup(curve),  # noqa: S704 - charts escape every label
        }

    def login(request: Request) -> Response:
        import anyio.from_thread

        if request.method == "GET":
            html = (
                environment()
                .get_template("login.html")
                .render(
                    nav=(),
                    here="/login",
                    home="",
                    next=request.query_params.get("next", "/"),
                )
            )
            return HTMLResponse(html)
        form = parse_qs(anyio.from_thread.run(request.body).decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0]
        target = (form.get("next") or ["/"])[0]
        if not target.startswith("/") or target.startswith(("//", "/\\")) or "\\" in target:
            target = "/"  # only a path of this server: never another host
        try:
            home.tokens.access(token)
        except Denied:
            html = (
                environment()
                .get_template("login.html")
                .render(nav=(), here="/login", home="", next=target, error="unknown token")
            )
            return HTMLResponse(html, status_code=401)
        out = RedirectResponse(target, 303)
        out.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return out

    return [
        Route("/", owners, name="page_owners"),
        Route("/owners/{owner}", owner, name="page_owner"),
        Route("/memories/{id}", memory, name="page_memory"),
        Route("/contradictions", contradictions, name="page_contradictions"),
        Route("/charts", charts_page, name="page_charts"),
        Route("/skills", skills, name="page_skills"),
        Route("/skills/{owner}/{name}", skill, name="page_skill"),
        Route("/memory-skills", memory_skills, name="page_memory_skills"),
        Route("/login", login, methods=["GET", "POST"], name="login"),
    ]

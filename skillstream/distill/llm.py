"""The LLM task-skill distiller (any ``skillstream.llm`` backend, e.g. an OpenAI-compatible server).

Calls per conversation block (prompts ``distill_*`` in ``skillstream/prompts/en|zh``, picked by the
block's language):

* ``distill_chunk``: one call splits the block into tasks (message ranges, broad names, chit-chat
  left out). A block that is all chit-chat makes no call.
* ``distill_extract``: one call per task segment that passed the gate, shown the owner's recalled
  task skills (at most three, with their ids); the answer is a complete task-skill record and, for
  an update, the id of the recalled skill it replaces.
* full mode only, per distilled skill: ``distill_scripts``, ``distill_tools`` and
  ``distill_references``, sent concurrently.

Every answer is checked (JSON schema, then the validators here); a bad answer is asked again by the
backend a bounded number of times, then the segment is recorded as failed with its calls. An
update that names a skill that was not recalled is distilled as a new skill instead (the check lives
in the orchestrator, for both distillers).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from skillstream.distill.draft import Draft
from skillstream.distill.package import FILE_NAME
from skillstream.distill.recall import RecallHit
from skillstream.distill.record import SECTIONS, ConversationBlock, TaskSegment, TaskSkill, slugify
from skillstream.distill.sections import FILES, LIST, TEXT
from skillstream.distill.segment import exchanges
from skillstream.embed import Embed
from skillstream.lang import detect_language
from skillstream.llm.base import ChatBackend, ChatRequest
from skillstream.model import LLMCall
from skillstream.prompts import render

MAX_MESSAGE_CHARS = 1500
MAX_EXISTING = 3

_STR_LIST = {"type": "array", "items": {"type": "string"}}
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
CHUNK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tasks": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "ranges": {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "integer"}},
                    },
                },
                "required": ["name", "ranges"],
            },
        }
    },
    "required": ["tasks"],
}
_JSON_TYPE = {TEXT: {"type": "string"}, LIST: _STR_LIST, FILES: _STR_MAP}
_EXTRACTED = tuple(s for s in SECTIONS if s.llm)
"""Sections an extraction answer carries (the package files come from the full-mode calls)."""
EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "skip": {"type": "boolean"},
        "name": {"type": "string"},
        **{s.name: _JSON_TYPE[s.shape] for s in _EXTRACTED},
        "update": {"type": "boolean"},
        "update_of": {"type": "string"},
    },
    "required": [
        "skip",
        "name",
        *(s.name for s in _EXTRACTED if s.llm_required),
        "update",
        "update_of",
    ],
}
SCRIPTS_SCHEMA = {"type": "object", "properties": {"scripts": _STR_MAP}, "required": ["scripts"]}
TOOLS_SCHEMA = {"type": "object", "properties": {"tools": _STR_LIST}, "required": ["tools"]}
REFERENCES_SCHEMA = {
    "type": "object",
    "properties": {"references": _STR_MAP},
    "required": ["references"],
}


class LLMDistiller:
    """Task chunking, extraction and full-mode details with an LLM.

    Args:
        backend: The chat backend (``llm.make_backend``).
        embed: Texts to unit vectors (unused by the LLM itself; kept for the common interface).
        shift_threshold: Unused; the LLM chunks by meaning.
        detail_workers: Concurrent requests of the full-mode details.
    """

    def __init__(
        self,
        backend: ChatBackend,
        embed: Embed | None = None,
        *,
        shift_threshold: float = 0.2,
        detail_workers: int = 3,
    ) -> None:
        self.backend = backend
        self.embed = embed
        self.name = getattr(backend, "name", "llm")
        self.detail_workers = detail_workers

    # ------------------------------------------------------------------ chunking
    def chunk(self, block: ConversationBlock) -> tuple[list[TaskSegment], list[LLMCall]]:
        """Task segments of a block from one ``distill_chunk`` call."""
        if not exchanges(block):
            return [], []
        lang = detect_language(" ".join(m.text for m in block.messages))
        lines = [
            f"[{i}] {m.role} ({m.speaker}): {_clip(m.text)}" for i, m in enumerate(block.messages)
        ]
        n = len(block.messages)

        def validate(data: Any) -> list[tuple[str, list[int]]]:
            tasks = data.get("tasks") if isinstance(data, dict) else None
            if not isinstance(tasks, list):
                raise ValueError('expected {"tasks": [...]}')
            out, used = [], set()
            for t in tasks:
                name = str(t.get("name", "")).strip() if isinstance(t, dict) else ""
                if not name:
                    raise ValueError("every task needs a non-empty name")
                positions: list[int] = []
                for r in t.get("ranges") or []:
                    if not (
                        isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r)
                    ):
                        raise ValueError(f"a range must be [first, last], got {r!r}")
                    a, b = r
                    if not 0 <= a <= b < n:
                        raise ValueError(f"range {r} is outside the messages 0..{n - 1}")
                    positions.extend(i for i in range(a, b + 1) if i not in used)
                used.update(positions)
                if positions:
                    out.append((name, sorted(positions)))
            return out

        request = ChatRequest(
            "distill_chunk",
            (("user", render("distill_chunk", lang, messages="\n".join(lines))),),
            schema=CHUNK_SCHEMA,
            span_id=block.block_id,
        )
        response = self.backend.chat(request, validate)
        segments = []
        for name, positions in response.data:
            text = " ".join(block.messages[i].text for i in positions)
            segments.append(
                TaskSegment.of(block, positions, title=name, lang=detect_language(text))
            )
        segments.sort(key=lambda s: s.positions[0])
        return segments, list(response.calls)

    # ------------------------------------------------------------------ extraction
    def propose(
        self, segment: TaskSegment, recall: Callable[[str], list[RecallHit]]
    ) -> tuple[Draft | None, list[LLMCall]]:
        """A complete task-skill draft from one ``distill_extract`` call."""
        users = [m.text for m in segment.messages if m.role == "user"][:3]
        hits = recall("\n".join([segment.title, *users]))[:MAX_EXISTING]
        ids = {h.skill.id for h in hits}
        lang = segment.lang
        prompt = render(
            "distill_extract",
            lang,
            task=segment.title or "(unnamed)",
            messages="\n".join(
                f"{m.role} ({m.speaker}): {_clip(m.text)}" for m in segment.messages
            ),
            existing=_existing(hits, lang),
        )

        def validate(data: Any) -> Draft | None:
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
            if data.get("skip"):
                return None
            procedure = _strings(data.get("procedure"), "procedure")
            if not procedure:
                raise ValueError('"procedure" is empty; give the steps, or set "skip" to true')
            title = str(data.get("title") or data.get("name") or segment.title).strip()
            name = slugify(str(data.get("name") or title))
            update_of = str(data.get("update_of") or "").strip() if data.get("update") else ""
            sections: dict[str, Any] = {
                s.name: _READ[s.shape](data.get(s.name), s.name) for s in _EXTRACTED
            }
            sections.update(title=title, procedure=procedure)
            return Draft(
                **sections,
                name=name,
                update_of=update_of if update_of in ids else None,
                merge="replace",
                lang=lang,
            )

        request = ChatRequest(
            "distill_extract",
            (("user", prompt),),
            schema=EXTRACT_SCHEMA,
            span_id=segment.segment_id,
        )
        response = self.backend.chat(request, validate)
        return response.data, list(response.calls)

    # ------------------------------------------------------------------ full mode
    def details(self, skill: TaskSkill) -> tuple[TaskSkill, list[LLMCall]]:
        """Scripts, tools and reference documents, from three concurrent calls."""
        text = _skill_text(skill)
        lang = skill.lang

        def planned(items: dict[str, str]) -> str:
            return "\n".join(f"- {k}: {v}" for k, v in items.items()) or "-"

        jobs = {
            "scripts": (
                render("distill_scripts", lang, skill=text, planned=planned(skill.planned_scripts)),
                SCRIPTS_SCHEMA,
                lambda d: _files(d.get("scripts"), "scripts"),
            ),
            "tools": (
                render("distill_tools", lang, skill=text),
                TOOLS_SCHEMA,
                lambda d: _strings(d.get("tools"), "tools"),
            ),
            "references": (
                render(
                    "distill_references",
                    lang,
                    skill=text,
                    planned=planned(skill.planned_references),
                ),
                REFERENCES_SCHEMA,
                lambda d: _files(d.get("references"), "references"),
            ),
        }

        def ask(key: str) -> Any:
            prompt, schema, check = jobs[key]
            req = ChatRequest(
                f"distill_{key}", (("user", prompt),), schema=schema, span_id=skill.id
            )
            return self.backend.chat(req, lambda d: check(d if isinstance(d, dict) else {}))

        with ThreadPoolExecutor(
            max_workers=self.detail_workers, thread_name_prefix="distill-details"
        ) as pool:
            futures = {key: pool.submit(ask, key) for key in jobs}
            answers = {key: f.result() for key, f in futures.items()}
        out = skill.copy()
        out.scripts = {**out.scripts, **answers["scripts"].data}
        out.tools = answers["tools"].data or out.tools
        out.references = {**out.references, **answers["references"].data}
        out.planned_scripts = {k: v for k, v in out.planned_scripts.items() if k not in out.scripts}
        out.planned_references = {
            k: v for k, v in out.planned_references.items() if k not in out.references
        }
        calls = [c for key in jobs for c in answers[key].calls]
        return out, calls


def _text(value: Any, field: str) -> str:
    return str(value or "").strip()


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def _strings(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError(f'"{field}" must be a list of strings')
    return [str(v).strip() for v in value if str(v).strip()]


def _files(value: Any, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f'"{field}" must map file names to text')
    out = {}
    for name, text in value.items():
        if not FILE_NAME.match(str(name)):
            raise ValueError(
                f'"{field}": {name!r} is not a plain file name (letters, digits, . _ -)'
            )
        out[str(name)] = str(text)
    return out


_READ: dict[str, Callable[[Any, str], Any]] = {TEXT: _text, LIST: _strings, FILES: _files}
"""How each shape of section is read from an answer."""


def _existing(hits: list[RecallHit], lang: str) -> str:
    if not hits:
        return "(无)" if lang == "zh" else "(none)"
    blocks = []
    for h in hits:
        s = h.skill
        doc = {
            "id": s.id,
            "name": s.name,
            "description": s.description,
            "procedure": s.procedure,
            "experience": s.experience,
            "preferences": s.preferences,
            "examples": s.examples[:2],
        }
        blocks.append(json.dumps(doc, ensure_ascii=False, indent=1))
    return "\n".join(blocks)


def _skill_text(skill: TaskSkill) -> str:
    doc = {
        "name": skill.name,
        "title": skill.title,
        "description": skill.description,
        "procedure": skill.procedure,
        "experience": skill.experience,
        "tools": skill.tools,
        "verification": skill.verification,
    }
    return json.dumps(doc, ensure_ascii=False, indent=1)

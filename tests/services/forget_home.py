"""A home with one owner to forget among others, and what the forget tests read back from it.

``rows()`` gives two owners' chat logs: ``TARGET`` carries unique markers in its owner id, its
speaker name, its message text and a task-skill conversation (so a package is published), plus
records that become dead letters; ``OTHER`` has the same shape without a marker. ``build()`` runs
them through the real CLI with the scripted OpenAI-protocol server (so the answer cache fills) and a
recovery folder, and searches as the target (so the query log holds it).
"""

from __future__ import annotations

import json
import re
import sqlite3
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.memskill.conftest import span_turns
from tests.servers.openai_stub import OpenAIStub
from tests.servers.processes import cli_env, run_cli

TARGET = "QzOwner7"
OTHER = "alice"
MARKERS = (TARGET, "Qzspeaker", "Qztextmark", "Qzskillmark")
T0 = datetime(2025, 5, 6, 14, 0, tzinfo=UTC)
_MARK = re.compile(r"Qz\w+", re.IGNORECASE)


def conversation(owner: str, speaker: str, mark: str, skill_mark: str) -> list[dict[str, Any]]:
    """One owner's log: facts about itself, then a procedure (a task-skill conversation)."""
    conv = f"conv-{owner}"
    turns = [
        ("user", speaker, f"I love hiking with my sister {mark}. I live in Lisbon."),
        ("user", speaker, f"My favourite food is {mark} pasta and I work as a nurse."),
        ("user", speaker, f"How do I set up the {skill_mark} deploy pipeline?"),
        ("assistant", "Assistant", f"First, install the {skill_mark} command line tool."),
        ("assistant", "Assistant", f"Then, configure the {skill_mark} credentials file."),
        ("assistant", "Assistant", f"Next, run the {skill_mark} build for staging."),
        ("assistant", "Assistant", f"Finally, promote the {skill_mark} release to production."),
        ("user", speaker, "Thanks, that worked!"),
    ]
    return [
        {
            "conversation_id": conv,
            "user_id": owner,
            "name": name,
            "role": role,
            "content": text,
            "message_id": f"{owner}-m{i}",
            "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        }
        for i, (role, name, text) in enumerate(turns)
    ]


def rows() -> list[dict[str, Any]]:
    target = conversation(TARGET, "Qzspeaker", "Qztextmark", "Qzskillmark")
    other = conversation(OTHER, "Alice", "Marguerite", "terraform")
    dead = [
        # too early: refused at admission, kept as a dead letter with its text
        {**target[0], "message_id": f"{TARGET}-early", "timestamp": "1960-01-01T00:00:00Z"},
        # no content: refused at parsing, kept as a dead letter with the record
        {k: v for k, v in target[1].items() if k != "content"} | {"message_id": f"{TARGET}-x"},
    ]
    return target + other + dead


def write(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items), "utf-8")
    return path


def answer(body: dict[str, Any]) -> str:
    """The scripted model: an INSERT per user turn, and task-skill drafts that repeat the
    conversation's marker (so a package of the target holds it)."""
    schema = (body.get("response_format") or {}).get("json_schema", {})
    name, props = schema.get("name", ""), schema.get("schema", {}).get("properties", {})
    if name == "extract":
        ops = [
            {"action": "INSERT", "text": f"{speaker} said: {text}", "kind": "fact"}
            for speaker, text in span_turns(body)
            if speaker != "Assistant"
        ]
        return json.dumps({"operations": ops})
    prompt = json.dumps(body.get("messages", []))
    found = _MARK.search(prompt)
    word = found.group(0) if found else "terraform"
    if name == "distill_chunk":
        return json.dumps({"tasks": [{"name": f"deploy {word}", "ranges": [[0, 7]]}]})
    out: dict[str, Any] = {}
    for key, spec in props.items():
        kind = spec.get("type")
        if kind == "boolean":
            out[key] = False
        elif kind == "array":
            # steps that name only what the conversation names (the grounding check)
            out[key] = [f"Step {i}: set up {word}" for i in range(3)]
        elif kind == "object":
            out[key] = {}
        else:
            out[key] = f"deploy with {word}"
    if "tools" in out:
        out["tools"] = []
    out["name"] = f"deploy-{word.lower()}"
    out["update_of"] = ""
    return json.dumps(out)


def env(home: Path, url: str, **extra: str) -> dict[str, str]:
    return cli_env(
        home,
        SKILLSTREAM_LLM="openai",
        SKILLSTREAM_LLM_BASE_URL=url,
        SKILLSTREAM_LLM_API_KEY="sk-test-" + "k" * 20,
        SKILLSTREAM_LLM_RESPONSE_FORMAT="json_schema",
        SKILLSTREAM_DISTILL_MIN_STEPS="0",
        # one task-skill conversation per owner: serve (and publish) it at once, so a package
        # holds the owner's bytes for forget to erase
        SKILLSTREAM_SKILL_MIN_SUPPORT="1",
        **extra,
    )


def build(home: Path, source: Path, recovery: Path, **extra: str) -> None:
    """Run the flow over ``source`` with the scripted model and a recovery folder, then search as
    each owner (the query log)."""
    with OpenAIStub(answer) as stub:
        e = env(home, stub.url, **extra)
        run_cli("run", "--source", str(source), "--recovery-dir", str(recovery), env=e)
        for owner in (TARGET, OTHER):
            run_cli("search", "--owner", owner, "hiking sister", env=e)


# ---------------------------------------------------------------------- reading it back
def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, and each zip member unpacked."""
    out: dict[str, bytes] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = str(path.relative_to(root))
        out[rel] = path.read_bytes()
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    out[f"{rel}!{name}"] = z.read(name)
    return out


def lance_versions(uri: str, options: dict | None = None) -> dict[str, bytes]:
    """Every row of every version of every LanceDB table, as JSON text."""
    import lance
    import lancedb

    out: dict[str, bytes] = {}
    db = lancedb.connect(uri, storage_options=options)
    for name in db.table_names():
        ds: Any = db.open_table(name).to_lance()
        for v in ds.versions():
            rows = lance.dataset(ds.uri, version=v["version"], storage_options=options)
            data = rows.to_table().to_pylist()
            out[f"lance:{name}@{v['version']}"] = json.dumps(data, default=str).encode()
    return out


def duckdb_rows(con: Any, tables: list[tuple[str, str]]) -> dict[str, bytes]:
    """Every row of the given ``(schema-qualified name, label)`` tables, as JSON text."""
    out = {}
    for qualified, label in tables:
        data = con.sql(f"SELECT * FROM {qualified}").fetch_arrow_table().to_pylist()
        out[label] = json.dumps(data, default=str).encode()
    return out


def catalog_rows(path: Path) -> dict[str, bytes]:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [r[0] for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()]
        return duckdb_rows(con, [(f'"{n}"', f"duckdb:{n}") for n in names])
    finally:
        con.close()


def sqlite_rows(root: Path) -> dict[str, bytes]:
    """Every row of every table of every SQLite file under ``root`` (cache, recovery)."""
    out = {}
    for path in sorted(root.rglob("*.sqlite*")):
        if path.suffix not in (".sqlite", ".sqlite3"):
            continue
        con = sqlite3.connect(path)
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for n in names:
                data = [repr(r) for r in con.execute(f'SELECT * FROM "{n}"')]
                out[f"sqlite:{path.name}:{n}"] = "\n".join(data).encode()
        finally:
            con.close()
    return out


def marked(stored: dict[str, bytes]) -> dict[str, list[str]]:
    """Where each marker occurs (case-insensitive, as keyword indexes lower-case text)."""
    found: dict[str, list[str]] = {}
    for where, data in stored.items():
        low = data.lower()
        for m in MARKERS:
            if m.lower().encode() in low:
                found.setdefault(m, []).append(where)
    return found


def owner_content(settings: Any, owner: str) -> dict[str, Any]:
    """What an owner holds, store by store, with volatile columns out: memories with vectors,
    catalog rows of every owner table, package files."""
    import lancedb

    from skillstream.services.publishing import Publisher, owner_dir
    from skillstream.storage.catalog import open_catalog
    from skillstream.storage.filters import eq
    from skillstream.storage.forget_catalog import owner_tables

    out: dict[str, Any] = {}
    db = lancedb.connect(settings.storage.lancedb, storage_options=settings.storage.storage_options)
    for name in db.table_names():
        t = db.open_table(name).to_lance().to_table(filter=eq("owner_id", owner)).to_pylist()
        out[f"lance:{name}"] = sorted(json.dumps(r, default=str, sort_keys=True) for r in t)
    with open_catalog(settings.storage, read_only=True) as cat:
        for table in owner_tables(cat):
            rows = cat.sql(f'SELECT * FROM "{table}" WHERE owner_id = ?', [owner]).to_pylist()
            out[f"catalog:{table}"] = sorted(
                json.dumps(r, default=str, sort_keys=True) for r in rows
            )
    store = Publisher.from_settings(settings.storage).store
    out["packages"] = {p: store.get(p) for p in store.list(owner_dir(owner) + "/")}
    return out

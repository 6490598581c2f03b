"""The memory flow on the file sources: ChatGPT and Claude exports, a backfill from S3 (moto), and
a folder where bad files sit among good ones."""

from __future__ import annotations

import gzip
import json

import pytest
from bytewax.testing import run_main

from skillstream.connectors.files import FileSource
from skillstream.settings import Settings
from skillstream.storage.catalog import Catalog
from tests.factories import (
    chat_rows,
    chatgpt_export,
    claude_export,
    conversation_rows,
    flow_of,
    locomo_sample,
    write_jsonl,
)
from tests.flows.conftest import memory_ids
from tests.storage.conftest import BUCKET, s3  # noqa: F401 - fixture


def stored(settings: Settings) -> tuple[list[dict], list[dict]]:
    """(memories with their source messages, dead letters) of a home."""
    cat = Catalog(settings.storage.catalog, read_only=True)
    try:
        memories = cat.sql(
            "select id, owner_id, text, source_message_ids from memory_meta order by id"
        ).to_pylist()
        dead = cat.sql("select source, position, reason from dead_letters").to_pylist()
    finally:
        cat.close()
    return memories, dead


def backfill(settings: Settings, source: FileSource) -> tuple[list[dict], list[dict]]:
    run_main(flow_of(settings, source))
    return stored(settings)


@pytest.mark.parametrize(
    ("export", "owner", "prefix"),
    [(chatgpt_export, "gpt-conv-", "gpt"), (claude_export, "acct-1", "cl")],
)
def test_chat_exports_store_memories_of_their_messages(tmp_path, settings, export, owner, prefix):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export(conversations=2, turns=8)))
    memories, dead = backfill(settings, FileSource(path))
    assert not dead
    assert all(m["owner_id"].startswith(owner) for m in memories)
    # every user message (the even turns) is remembered, from the active branch only
    user_ids = {f"{prefix}-{c}-{t}" for c in range(2) for t in range(0, 8, 2)}
    cited = {s for m in memories for s in m["source_message_ids"]}
    assert cited == user_ids
    single = {
        m["source_message_ids"][0]: m["text"] for m in memories if len(m["source_message_ids"]) == 1
    }
    assert set(single) == user_ids
    if prefix == "gpt":  # the prompt with an image part: its text part is what is remembered
        assert single["gpt-0-2"] == "The user's sister Lena works as a nurse in Berlin."
        assert all("Draft" not in m["text"] for m in memories)
    else:  # the message whose text is only in its content parts
        assert single["cl-0-2"] == "The user works as a product designer at Acme."


def test_bad_files_among_good_ones_lose_nothing(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    write_jsonl(good / "a.jsonl", conversation_rows("c1", 30))
    (good / "b.json").write_text(json.dumps([locomo_sample(1, sessions=2, turns=6)]))
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for f in good.iterdir():
        (mixed / f.name).write_bytes(f.read_bytes())
    (mixed / "package.json").write_text(json.dumps({"name": "tool", "dependencies": {}}))
    (mixed / "broken.parquet").write_bytes(b"PAR1 not really")
    full = json.dumps([locomo_sample(3, sessions=2, turns=6)])
    (mixed / "cut.json").write_text(full[: len(full) // 2])

    def home(name: str) -> Settings:
        return Settings.load(home=str(tmp_path / name), epoch_interval_s=0.0, span_tokens=128)

    clean, mixed_home = home("clean"), home("mixed")
    memories, dead = backfill(clean, FileSource(good))
    assert memories and not dead
    memories_mixed, dead_mixed = backfill(mixed_home, FileSource(mixed))
    assert memory_ids(mixed_home) == memory_ids(clean)
    assert memories_mixed == memories
    assert sorted(d["source"].rsplit("/", 1)[-1] for d in dead_mixed) == [
        "broken.parquet",
        "cut.json",
        "package.json",
    ]
    assert all(d["position"] == "file" for d in dead_mixed)


@pytest.mark.slow
def test_backfill_from_s3_globs_gzip_files(tmp_path, s3):  # noqa: F811
    import s3fs

    endpoint, options = s3
    fs = s3fs.S3FileSystem(
        key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True
    )
    local = tmp_path / "logs"
    local.mkdir()
    for i, cid in enumerate(("c1", "c2")):
        path = write_jsonl(local / f"part-{i}.jsonl.gz", conversation_rows(cid, 30), gz=True)
        fs.put(str(path), f"{BUCKET}/logs/{path.name}")
    fs.pipe(f"{BUCKET}/logs/readme.txt", b"not a log")
    fs.pipe(
        f"{BUCKET}/logs/broken.jsonl.gz",
        gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in chat_rows(20)))[:-30],
    )

    def home(name: str) -> Settings:
        return Settings.load(home=str(tmp_path / name), epoch_interval_s=0.0, span_tokens=128)

    remote = FileSource(f"s3://{BUCKET}/logs/part-*.jsonl.gz", storage_options=options)
    assert list(remote.files) == [
        f"s3://{BUCKET}/logs/part-0.jsonl.gz",
        f"s3://{BUCKET}/logs/part-1.jsonl.gz",
    ]
    from_s3, from_disk = home("s3"), home("disk")
    memories, dead = backfill(from_s3, remote)
    assert memories and not dead
    backfill(from_disk, FileSource(str(local / "*.jsonl.gz")))
    assert memory_ids(from_s3) == memory_ids(from_disk)

    # a folder URI lists its readable files; a truncated one is a dead letter, not the end
    folder = FileSource(f"s3://{BUCKET}/logs/", storage_options=options)
    assert sorted(folder.files) == [
        f"s3://{BUCKET}/logs/broken.jsonl.gz",
        f"s3://{BUCKET}/logs/part-0.jsonl.gz",
        f"s3://{BUCKET}/logs/part-1.jsonl.gz",
    ]
    again = home("folder")
    _, dead = backfill(again, folder)
    assert [d["source"] for d in dead] == [f"s3://{BUCKET}/logs/broken.jsonl.gz"]
    assert set(memory_ids(from_s3)) < set(memory_ids(again))

"""Embeddings from an OpenAI-compatible endpoint: the real ``openai`` client against the stub's
``/v1/embeddings``, a whole run and search on those vectors, and a home that refuses a second model.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.embed import OpenAIEmbedder, get_embedder, identity
from skillstream.errors import ConfigError
from skillstream.settings import Settings
from tests.servers.openai_stub import OpenAIStub, bag_of_words

SECRET_KEY = "sk-embed-test-0123456789abcdef"


def embedding(stub: OpenAIStub, **keys: Any) -> Any:
    values = {"embed_backend": "openai", "embed_base_url": stub.url, "embed_model": "stub-embed"}
    return Settings.from_keys(**{**values, **keys}).embedding


def test_width_comes_from_the_endpoint_and_vectors_are_unit_rows_in_order(openai_stub):
    texts = ["Maya flies to Lisbon", "", "the heron at the lake", "Lisbon in May", "x"]
    embedder = OpenAIEmbedder(embedding(openai_stub, embed_batch=2))
    assert embedder.dim == openai_stub.embedding_dim == 32

    got = embedder.encode(texts)

    assert got.shape == (5, 32) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    want = np.asarray(bag_of_words("the heron at the lake", 32), dtype=np.float32)
    np.testing.assert_allclose(got[2], want / np.linalg.norm(want), atol=1e-6)
    # the probe, then three batches of at most two texts; the empty text went out as a space
    sizes = [len(r["input"]) for r in openai_stub.embedding_requests]
    assert sizes == [1, 2, 2, 1]
    assert openai_stub.embedding_requests[1]["input"][1] == " "
    assert all(r["model"] == "stub-embed" for r in openai_stub.embedding_requests)
    assert openai_stub.count == 0  # no chat request
    assert embedder.encode([]).shape == (0, 32)
    assert got[0] @ got[3] > got[0] @ got[2]  # shared words are near


def test_dimensions_are_asked_of_the_endpoint_and_name_the_identity(openai_stub):
    settings = embedding(openai_stub, embed_dimensions=8)
    assert OpenAIEmbedder(settings).dim == 8
    assert openai_stub.embedding_requests[0]["dimensions"] == 8
    assert identity(settings) == "openai:stub-embed@8"
    assert identity(embedding(openai_stub)) == "openai:stub-embed"
    assert identity(Settings.from_keys().embedding) == "minilm"
    assert identity(Settings.from_keys(embed_model="all-MiniLM-L6-v2").embedding) == "minilm"


def test_an_unknown_model_or_a_dead_endpoint_is_a_clear_error_without_the_key(
    openai_stub, monkeypatch
):
    monkeypatch.setenv("SKILLSTREAM_EMBED_API_KEY", SECRET_KEY)
    with pytest.raises(ConfigError, match="has no model 'missing'") as e:
        OpenAIEmbedder(embedding(openai_stub, embed_model="missing"))
    assert SECRET_KEY not in str(e.value)
    dead = embedding(openai_stub, embed_timeout_s=2)
    openai_stub.close()
    with pytest.raises(Exception, match="embeddings request to http://127.0.0.1") as e2:
        OpenAIEmbedder(dead)
    assert SECRET_KEY not in str(e2.value)


def test_the_key_goes_to_the_endpoint_only(openai_stub, monkeypatch):
    monkeypatch.setenv("SKILLSTREAM_EMBED_API_KEY", SECRET_KEY)
    settings = embedding(openai_stub)
    OpenAIEmbedder(settings).encode(["hello"])
    assert SECRET_KEY not in repr(settings) and SECRET_KEY not in json.dumps(settings.model_dump())


def test_get_embedder_shares_one_endpoint_embedder_per_setting(openai_stub):
    settings = embedding(openai_stub)
    assert get_embedder(settings) is get_embedder(settings)
    assert isinstance(get_embedder(settings), OpenAIEmbedder)


def run_cli(home, env: dict[str, str], *args: str) -> Any:
    return CliRunner().invoke(cli, ["--home", str(home), *args], env=env)


def test_a_run_and_a_search_on_endpoint_vectors_and_a_second_model_is_refused(
    openai_stub, tmp_path
):
    home = tmp_path / "h"
    env = {
        "SKILLSTREAM_EMBED_BACKEND": "openai",
        "SKILLSTREAM_EMBED_BASE_URL": openai_stub.url,
        "SKILLSTREAM_EMBED_MODEL": "stub-embed",
    }
    res = run_cli(home, env, "run", "--json")
    assert res.exit_code == 0, res.output
    import lancedb

    table = lancedb.connect(str(home / "lancedb")).open_table("memories")
    assert table.count_rows() > 10
    assert table.schema.field("vector").type.list_size == 32
    assert table.schema.metadata[b"skillstream.embedding"] == b"openai:stub-embed"

    res = run_cli(home, env, "search", "Lisbon trip", "--owner", "maya", "--k", "3", "--json")
    assert res.exit_code == 0, res.output
    hits = json.loads(res.output)
    assert hits and all(h["owner_id"] == "maya" for h in hits)
    assert any("lisbon" in h["text"].lower() for h in hits)

    # the bundled model on this home: refused, for a run and for a search, naming both models
    for args in (("run",), ("search", "Lisbon", "--owner", "maya")):
        res = run_cli(home, {}, *args)
        assert res.exit_code != 0
        message = str(res.exception) + res.output
        assert "'openai:stub-embed'" in message and "'minilm'" in message, message
    assert (
        table.count_rows()
        == lancedb.connect(str(home / "lancedb")).open_table("memories").count_rows()
    )

    # another endpoint model of the same width: refused too
    res = run_cli(home, {**env, "SKILLSTREAM_EMBED_MODEL": "other-embed"}, "search", "Lisbon")
    assert res.exit_code != 0 and "'openai:other-embed'" in str(res.exception) + res.output

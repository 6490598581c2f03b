"""Settings: groups, precedence, strict parsing and the messages of bad values."""

from __future__ import annotations

import pickle
from datetime import timedelta

import pytest

from skillstream.errors import ConfigError
from skillstream.settings import GROUPS, KEYS, Settings, default_text, env_var, help_text


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No SKILLSTREAM_ variable (nor OPENAI_BASE_URL) of the caller's shell leaks in."""
    for key in KEYS:
        monkeypatch.delenv(env_var(key), raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def write_toml(home, text: str | bytes):
    home.mkdir(exist_ok=True)
    path = home / "skillstream.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_groups_hold_every_key_once_with_todays_defaults(tmp_path):
    s = Settings.load(home=str(tmp_path))
    assert len(KEYS) == 96
    assert s.llm.backend == "rules" and s.llm.cache is True and s.llm.model == "gpt-4o-mini"
    assert (s.embedding.model, s.embedding.batch) == ("minilm", 64)
    assert (s.embedding.prefetch, s.embedding.threads, s.embedding.blas_threads) == (True, 0, 1)
    assert s.embedding.cache == ""
    assert (s.embedding.backend, s.embedding.base_url, s.embedding.dimensions) == ("local", "", 0)
    assert (s.spans.span_tokens, s.spans.idle_gap) == (512, timedelta(minutes=30))
    assert s.flow.shards == 0 and s.flow.concurrency == 8 and s.flow.owner_state_max == 0
    assert s.flow.stop_timeout_s == 30.0
    assert s.lifecycle.default_scope == "private" and s.lifecycle.merge_threshold == 0.92
    assert (s.lifecycle.decay_rule, s.lifecycle.decay_below, s.lifecycle.rank_rule) == (
        "seed",
        0.3,
        "product",
    )
    assert s.lifecycle.rank_diversity == 0.5
    assert (s.lifecycle.archive_after_s, s.lifecycle.expire_archived_after_s) == (0, 0)
    assert (s.lifecycle.reorganize, s.lifecycle.reorganize_min_members) == (True, 3)
    assert s.distillation.enabled is True and s.distillation.full is False
    d = s.distillation
    assert (d.min_support, d.retire_below, d.min_outcomes, d.view_weight) == (2, 0.4, 3, 0.1)
    assert (d.stale_days, d.archive_days) == (90.0, 365.0)
    assert s.kafka.events_partitions == 3 and s.kafka.config == {}
    assert s.llm.prices == {}
    t = s.telemetry
    assert (t.metrics_addr, t.metrics_public, t.tracing) == ("", False, False)
    assert s.extraction.memory_skill_selection == "auto"
    assert s.extraction.hemisphere == "north"
    assert s.storage.lancedb == str(tmp_path / "lancedb")
    assert s.storage.index_vector_type == "ivf_flat"
    assert s.storage.catalog == str(tmp_path / "catalog.duckdb")
    assert s.storage.skills == str(tmp_path / "artifacts" / "task-skills")


def test_precedence_explicit_over_env_over_file_over_default(tmp_path, monkeypatch):
    home = tmp_path / "h"
    write_toml(home, "span_tokens = 100\nretrieve_k = 7\nllm_model = 'file-model'\n")
    monkeypatch.setenv("SKILLSTREAM_SPAN_TOKENS", "200")
    monkeypatch.setenv("SKILLSTREAM_LLM_MODEL", "env-model")
    s = Settings.load(home=str(home))
    assert (s.spans.span_tokens, s.extraction.retrieve_k, s.llm.model) == (200, 7, "env-model")
    s = Settings.load(home=str(home), span_tokens=300, llm_model=None)
    assert (s.spans.span_tokens, s.llm.model) == (300, "env-model")
    assert s.embedding.batch == 64  # nobody set it
    monkeypatch.setenv("SKILLSTREAM_SPAN_TOKENS", "")  # empty counts as unset
    assert Settings.load(home=str(home)).spans.span_tokens == 100


def test_home_from_the_environment_locates_the_file(tmp_path, monkeypatch):
    home = tmp_path / "h"
    write_toml(home, "retrieve_k = 9\n")
    monkeypatch.setenv("SKILLSTREAM_HOME", str(home))
    s = Settings.load()
    assert s.storage.home == str(home) and s.extraction.retrieve_k == 9


def test_from_keys_reads_neither_env_nor_file(tmp_path, monkeypatch):
    write_toml(tmp_path, "retrieve_k = 9\n")
    monkeypatch.setenv("SKILLSTREAM_SPAN_TOKENS", "200")
    s = Settings.from_keys(home=str(tmp_path))
    assert s.extraction.retrieve_k == 20 and s.spans.span_tokens == 512


def test_with_keys_returns_a_new_validated_copy():
    s = Settings.from_keys(span_tokens=64)
    t = s.with_keys(llm="openai", distill=False)
    assert (t.llm.backend, t.distillation.enabled, t.spans.span_tokens) == ("openai", False, 64)
    assert s.llm.backend == "rules"
    with pytest.raises(ConfigError, match="span_tokens"):
        s.with_keys(span_tokens=0)
    with pytest.raises(ConfigError, match="unknown setting 'llm_backend'"):
        s.with_keys(llm_backend="openai")


@pytest.mark.parametrize("raw,value", [("TRUE", True), ("off", False), ("1", True), ("No", False)])
def test_booleans_accept_the_usual_words(monkeypatch, raw, value):
    monkeypatch.setenv("SKILLSTREAM_LLM_CACHE", raw)
    assert Settings.load().llm.cache is value


def test_a_misspelt_boolean_names_the_variable_and_the_accepted_words(monkeypatch):
    monkeypatch.setenv("SKILLSTREAM_LLM_CACHE", "ture")
    with pytest.raises(ConfigError) as e:
        Settings.load()
    msg = str(e.value)
    assert "SKILLSTREAM_LLM_CACHE" in msg and "'ture'" in msg
    assert "true/false" in msg and "yes/no" in msg and "on/off" in msg


def test_a_bad_boolean_in_the_file_names_the_file_and_key(tmp_path):
    path = write_toml(tmp_path, 'distill = "maybe"\n')
    with pytest.raises(ConfigError) as e:
        Settings.load(home=str(tmp_path))
    assert f"{path}: key distill" in str(e.value) and "true/false" in str(e.value)


@pytest.mark.parametrize(
    "var,raw,expected",
    [
        ("SKILLSTREAM_SPAN_TOKENS", "-5", "an integer >= 1"),
        ("SKILLSTREAM_EMBED_BATCH", "0", "an integer >= 1"),
        ("SKILLSTREAM_IDLE_GAP_S", "nan", "a finite number > 0"),
        ("SKILLSTREAM_LLM_TIMEOUT_S", "inf", "a finite number > 0"),
        ("SKILLSTREAM_DEFAULT_CONFIDENCE", "7", "a finite number >= 0 and <= 1"),
        ("SKILLSTREAM_RETRIEVE_K", "many", "an integer >= 0"),
        ("SKILLSTREAM_LLM_CONCURRENCY", "2.5", "an integer >= 1"),
    ],
)
def test_numbers_out_of_range_or_not_finite_are_errors(monkeypatch, var, raw, expected):
    monkeypatch.setenv(var, raw)
    with pytest.raises(ConfigError) as e:
        Settings.load()
    assert var in str(e.value) and expected in str(e.value)


def test_zero_keeps_its_meaning_where_it_has_one():
    s = Settings.from_keys(shards=0, maintenance_interval_s=0, merge_threshold=1.5, decay_step=0)
    assert s.flow.shards == 0 and s.lifecycle.maintenance_interval_s == 0
    assert s.lifecycle.merge_threshold == 1.5  # above 1 turns merging off


def test_an_explicit_bad_value_is_checked_too():
    with pytest.raises(ConfigError, match="setting lesson_confidence: .*<= 1"):
        Settings.load(lesson_confidence=7)
    with pytest.raises(ConfigError, match="setting span_tokens"):
        Settings.from_keys(span_tokens=True)  # a boolean is not a count


@pytest.mark.parametrize(
    "var,raw,accepted",
    [
        ("SKILLSTREAM_LLM", "gpt", "'rules', 'openai'"),
        ("SKILLSTREAM_LLM_RESPONSE_FORMAT", "yaml", "'json_schema', 'json_object', 'text'"),
        ("SKILLSTREAM_MEMORY_SKILL_SELECTION", "best", "'auto', 'all', 'top_k', 'gumbel'"),
        ("SKILLSTREAM_MEMORY_SKILL_FUSION", "max", "'mean', 'weighted'"),
        ("SKILLSTREAM_DEFAULT_SCOPE", "public", "'private', 'fleet', 'session'"),
    ],
)
def test_unknown_names_list_the_accepted_ones(monkeypatch, var, raw, accepted):
    monkeypatch.setenv(var, raw)
    with pytest.raises(ConfigError) as e:
        Settings.load()
    assert var in str(e.value) and accepted in str(e.value)


def test_names_are_read_case_insensitively_and_the_embed_model_is_free_text(monkeypatch):
    monkeypatch.setenv("SKILLSTREAM_LLM", " OpenAI ")
    monkeypatch.setenv("SKILLSTREAM_EMBED_MODEL", "/models/MyModel")
    s = Settings.load()
    assert s.llm.backend == "openai" and s.embedding.model == "/models/MyModel"


def test_unknown_keys_are_errors(tmp_path):
    path = write_toml(tmp_path, "span_tokens = 10\nspan_token = 12\n")
    with pytest.raises(ConfigError) as e:
        Settings.load(home=str(tmp_path))
    assert str(path) in str(e.value) and "'span_token'" in str(e.value)
    with pytest.raises(ConfigError, match="unknown setting 'nope'"):
        Settings.load(home=str(tmp_path / "other"), nope=1)
    with pytest.raises(ConfigError, match="unknown setting 'nope'"):
        Settings.from_keys(nope=1)


def test_a_file_that_is_not_utf8_or_not_toml_is_an_error(tmp_path):
    path = write_toml(tmp_path, b"llm_model = '\xff\xfe'\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        Settings.load(home=str(tmp_path))
    write_toml(tmp_path, "span_tokens = = 3\n")
    with pytest.raises(ConfigError, match=f"{path}: not valid TOML"):
        Settings.load(home=str(tmp_path))


def test_a_string_where_the_file_needs_a_number_names_the_key(tmp_path):
    path = write_toml(tmp_path, "span_tokens = 'ten'\n")
    with pytest.raises(ConfigError, match=f"{path}: key span_tokens: bad value 'ten'"):
        Settings.load(home=str(tmp_path))


def test_maps_from_the_environment_are_json_objects(monkeypatch):
    monkeypatch.setenv("SKILLSTREAM_RANK_WEIGHTS", '{"recency": 0.5}')
    assert Settings.load().lifecycle.rank_weights == {"recency": 0.5}
    monkeypatch.setenv("SKILLSTREAM_RANK_WEIGHTS", "[0.5]")
    with pytest.raises(ConfigError, match="SKILLSTREAM_RANK_WEIGHTS.*JSON object"):
        Settings.load()
    monkeypatch.setenv("SKILLSTREAM_RANK_WEIGHTS", "{recency: 0.5")
    with pytest.raises(ConfigError, match="SKILLSTREAM_RANK_WEIGHTS"):
        Settings.load()


def test_openai_base_url_stands_in_for_an_unset_skillstream_variable(tmp_path, monkeypatch):
    write_toml(tmp_path, "llm_base_url = 'http://file/v1'\n")
    assert Settings.load(home=str(tmp_path)).llm.base_url == "http://file/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-env/v1")
    assert Settings.load(home=str(tmp_path)).llm.base_url == "http://openai-env/v1"
    monkeypatch.setenv("SKILLSTREAM_LLM_BASE_URL", "http://ours/v1")
    assert Settings.load(home=str(tmp_path)).llm.base_url == "http://ours/v1"
    s = Settings.load(home=str(tmp_path), llm_base_url="http://explicit/v1")
    assert s.llm.base_url == "http://explicit/v1"
    assert Settings.from_keys().llm.base_url == ""  # no environment read


def test_policies_as_toml_tables(tmp_path):
    write_toml(
        tmp_path,
        '[policies."*"]\nreadable_scopes = ["private"]\n\n'
        '[policies.bot]\nwritable_scopes = ["private", "session"]\ndefault_scope = "session"\n',
    )
    policies = Settings.load(home=str(tmp_path)).lifecycle.policies
    assert policies == {
        "*": {"readable_scopes": ["private"]},
        "bot": {"writable_scopes": ["private", "session"], "default_scope": "session"},
    }


def test_remote_home_keeps_the_catalog_local_and_reads_no_file():
    s = Settings.load(home="s3://bucket/prefix")
    assert s.storage.lancedb == "s3://bucket/prefix/lancedb"
    assert s.storage.artifacts == "s3://bucket/prefix/artifacts"
    assert s.storage.skills == "s3://bucket/prefix/artifacts/task-skills"
    assert not s.storage.catalog.startswith("s3://")


def test_settings_and_groups_pickle_and_stay_frozen():
    s = Settings.from_keys(policies={"*": {"readable_scopes": ["private"]}}, span_tokens=99)
    assert pickle.loads(pickle.dumps(s)) == s
    assert pickle.loads(pickle.dumps(s.lifecycle)) == s.lifecycle
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        s.spans.span_tokens = 1  # type: ignore[misc]


def test_describe_is_flat_and_masks_credentials(monkeypatch):
    monkeypatch.setenv(
        "SKILLSTREAM_STORAGE_OPTIONS", '{"aws_secret_access_key": "s3cr3t", "region": "eu"}'
    )
    monkeypatch.setenv("SKILLSTREAM_KAFKA_CONFIG", '{"sasl.password": "pw", "acks": "all"}')
    out = Settings.load().describe()
    assert set(out) == set(KEYS)
    assert out["storage_options"] == {"aws_secret_access_key": "***", "region": "eu"}
    assert out["kafka_config"] == {"sasl.password": "***", "acks": "all"}
    assert out["llm"] == "rules" and out["span_tokens"] == 512
    assert "s3cr3t" not in repr(Settings.load())


def test_every_field_is_described_without_repeating_its_variable_or_default():
    for key, (group, name) in KEYS.items():
        doc = GROUPS[group].model_fields[name].description
        assert doc and doc.endswith("."), key
        assert env_var(key) not in doc, key
        assert "; default" not in doc and "default none" not in doc, key
        assert help_text(key).endswith(f" {env_var(key)}; default {default_text(key)}."), key


def test_lifecycle_rules_are_named_and_checked(tmp_path):
    s = Settings.load(home=str(tmp_path), decay_rule="IDLE", rank_rule="weighted")
    assert (s.lifecycle.decay_rule, s.lifecycle.rank_rule) == ("idle", "weighted")
    with pytest.raises(ConfigError, match="decay_rule: bad value 'daily'; expected one of 'seed'"):
        Settings.load(home=str(tmp_path), decay_rule="daily")
    with pytest.raises(ConfigError, match="rank_rule: bad value 'sum'; expected one of 'product'"):
        Settings.load(home=str(tmp_path), rank_rule="sum")
    with pytest.raises(ConfigError, match="reorganize_min_members"):
        Settings.load(home=str(tmp_path), reorganize_min_members=1)

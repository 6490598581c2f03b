import pytest

from skillstream.errors import ConfigError
from skillstream.ids import prefixed_id, stable_id
from skillstream.lang import detect_language
from skillstream.redact import DEFAULT_REDACTOR, Redactor, SensitivePattern
from skillstream.settings import Settings


def test_stable_id_separates_parts():
    assert stable_id("a", "bc") != stable_id("ab", "c")
    assert stable_id("a", 1) == stable_id("a", 1)
    assert prefixed_id("mem", "x").startswith("mem_")


def test_stable_ids_hash_the_json_of_their_parts():
    """Strings and integers take a shorter road to their JSON text; the text is the same."""
    import hashlib
    import json

    parts = [
        "",
        "mem_0a",
        'say "hi" \\ now',
        "naïve café 中文 😀",
        "\x00\x1f\n\u2028",
        0,
        -7,
        10**30,
    ]
    parts += [None, True, 2.5, ["a", 1], {"b": 1, "a": [2]}, ("t", 3)]
    for part in parts:
        h = hashlib.blake2b(digest_size=16)
        h.update(json.dumps(part, sort_keys=True, ensure_ascii=False, default=str).encode())
        h.update(b"\x1f")
        assert stable_id(part) == h.hexdigest(), part


def test_language_detection():
    assert detect_language("I went hiking yesterday") == "en"
    assert detect_language("我昨天去爬山了") == "zh"
    assert detect_language("我用 Python 写了一个 script") == "zh"
    assert detect_language("The word 你好 means hello in Chinese") == "en"


def test_settings_precedence(tmp_path, monkeypatch):
    home = tmp_path / "h"
    home.mkdir()
    (home / "skillstream.toml").write_text(
        "span_tokens = 100\nretrieve_k = 7\nllm_model = 'file-model'\n"
    )
    monkeypatch.setenv("SKILLSTREAM_SPAN_TOKENS", "200")
    s = Settings.load(home=str(home))
    assert (s.spans.span_tokens, s.extraction.retrieve_k, s.llm.model) == (200, 7, "file-model")
    s = Settings.load(home=str(home), span_tokens=300)
    assert s.spans.span_tokens == 300
    assert s.storage.lancedb == str(home / "lancedb") and s.storage.catalog == str(
        home / "catalog.duckdb"
    )


def test_settings_remote_home_keeps_catalog_local(monkeypatch):
    monkeypatch.delenv("SKILLSTREAM_CATALOG_PATH", raising=False)
    s = Settings.load(home="s3://bucket/prefix")
    assert s.storage.lancedb == "s3://bucket/prefix/lancedb"
    assert s.storage.artifacts == "s3://bucket/prefix/artifacts"
    assert not s.storage.catalog.startswith("s3://")


def test_settings_errors(tmp_path, monkeypatch):
    with pytest.raises(ConfigError):
        Settings.load(nope=1)
    monkeypatch.setenv("SKILLSTREAM_SPAN_TOKENS", "many")
    with pytest.raises(ConfigError, match="span_tokens"):
        Settings.load(home=str(tmp_path))


@pytest.mark.parametrize(
    "text,name",
    [
        ("my password is hunter22!", "password"),
        ("card 4111 1111 1111 1111 ok", "credit_card"),
        ("use sk-proj-abcdefghijklmnop1234 for it", "openai_key"),
        ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        ("api_key = abcdef1234567890XYZ", "api_key"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "private_key"),
        ("ghp_" + "a" * 36, "github_token"),
        ("密码是 abc12345", "password"),
    ],
)
def test_default_patterns_redact(text, name):
    out, hits = DEFAULT_REDACTOR.apply(text)
    assert name in hits
    assert f"[REDACTED:{name}]" in out


def test_redactor_leaves_ordinary_text_and_non_luhn_numbers():
    for t in ["call me at 2023 05 08 12", "order 1234 5678 9012 3456 arrived", "I like tea"]:
        assert DEFAULT_REDACTOR.apply(t) == (t, [])


def test_custom_reject_pattern():
    r = Redactor((SensitivePattern("ssn", r"\b\d{3}-\d{2}-\d{4}\b", action="reject"),))
    text, hits = r.apply("ssn 123-45-6789")
    assert hits == ["ssn"] and r.rejects(hits) == ["ssn"]

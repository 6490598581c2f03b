import pytest

from skillstream.config import Settings
from skillstream.errors import ConfigError
from skillstream.ids import prefixed_id, stable_id
from skillstream.lang import detect_language
from skillstream.redact import DEFAULT_REDACTOR, Redactor, SensitivePattern


def test_stable_id_separates_parts():
    assert stable_id("a", "bc") != stable_id("ab", "c")
    assert stable_id("a", 1) == stable_id("a", 1)
    assert prefixed_id("mem", "x").startswith("mem_")


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
    assert (s.span_tokens, s.retrieve_k, s.llm_model) == (200, 7, "file-model")
    s = Settings.load(home=str(home), span_tokens=300)
    assert s.span_tokens == 300
    assert s.lancedb == str(home / "lancedb") and s.catalog == str(home / "catalog.duckdb")


def test_settings_remote_home_keeps_catalog_local(monkeypatch):
    monkeypatch.delenv("SKILLSTREAM_CATALOG_PATH", raising=False)
    s = Settings.load(home="s3://bucket/prefix")
    assert s.lancedb == "s3://bucket/prefix/lancedb"
    assert s.artifacts == "s3://bucket/prefix/artifacts"
    assert not s.catalog.startswith("s3://")


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

"""Tolerant JSON extraction and the schema check."""

from __future__ import annotations

import pytest

from skillstream.errors import TerminalError
from skillstream.llm.parse import ParseError, check_schema, extract_json, strip_trailing_commas


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2, 3]\n", [1, 2, 3]),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('Here you go:\n```json\n{"ops": []}\n```\nAnything else?', {"ops": []}),
        ('Sure! The answer is {"city": "Paris"} as requested.', {"city": "Paris"}),
        ('{"a": [1, 2,],}', {"a": [1, 2]}),
        ('{"a": {"b": 1,},\n}', {"a": {"b": 1}}),
        ('prefix [ {"x": 1}, {"x": 2}, ] suffix', [{"x": 1}, {"x": 2}]),
        ('{"quote": "she said \\"hi\\" {"}', {"quote": 'she said "hi" {'}),
        ('\ufeff{"bom": true}', {"bom": True}),
        ('{"zh": "我喜欢咖啡"}', {"zh": "我喜欢咖啡"}),
        ('```json\nnot json\n```\n{"fallback": 1}', {"fallback": 1}),
        ("null", None),
        ("42", 42),
    ],
)
def test_extract_json(text: str, expected: object) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty answer"),
        ("   \n", "empty answer"),
        (None, "empty answer"),
        ("I cannot help with that.", "no JSON object or array found"),
        ('Here: {"a": [1, 2', "cut off before its end"),
        ("{'a': 1}", "no JSON object or array found"),
    ],
)
def test_extract_json_errors(text: str | None, reason: str) -> None:
    with pytest.raises(ParseError, match=reason) as info:
        extract_json(text)
    assert isinstance(info.value, TerminalError)
    assert info.value.text == (text or "")


def test_expect_skips_values_of_the_other_kind() -> None:
    text = 'Note [1] says: {"text": "braces } and ] inside, and a comma,]"}'
    assert extract_json(text) == [1]
    assert extract_json(text, expect="object") == {"text": "braces } and ] inside, and a comma,]"}
    assert extract_json("only [1, 2] here", expect="object") == [1, 2]


def test_parse_error_carries_an_excerpt() -> None:
    text = "no json here " * 100
    with pytest.raises(ParseError) as info:
        extract_json(text)
    assert info.value.excerpt == text[:300] + "..."
    assert info.value.excerpt in str(info.value)


def test_strip_trailing_commas_leaves_strings_alone() -> None:
    assert strip_trailing_commas('{"a": "x,}", "b": [1,],}') == '{"a": "x,}", "b": [1]}'


SCHEMA = {
    "type": "object",
    "properties": {
        "ops": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "op": {"enum": ["INSERT", "UPDATE", "DELETE", "NOOP"]},
                    "text": {"type": "string"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "target": {"type": ["integer", "null"]},
                },
                "required": ["op"],
                "additionalProperties": False,
            },
            "maxItems": 3,
        }
    },
    "required": ["ops"],
}


def test_check_schema_accepts_a_matching_answer() -> None:
    check_schema(
        {"ops": [{"op": "INSERT", "text": "x", "confidence": 0.5, "target": None}]}, SCHEMA
    )
    check_schema({"ops": [{"op": "UPDATE", "target": 3}]}, SCHEMA)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([], "$ should be object, got list"),
        ({}, "$ is missing the required key 'ops'"),
        ({"ops": [{"op": "MERGE"}]}, "$.ops[0].op should be one of"),
        ({"ops": [{"op": "NOOP", "why": "x"}]}, "keys the schema does not allow: ['why']"),
        ({"ops": [{"op": "NOOP", "confidence": 2}]}, "$.ops[0].confidence should be <= 1"),
        ({"ops": [{"op": "NOOP", "confidence": True}]}, "confidence should be number, got bool"),
        ({"ops": [{"op": "NOOP", "target": 1.5}]}, "target should be integer or null"),
        ({"ops": [{"op": "NOOP"}] * 4}, "$.ops should have at most 3 items"),
    ],
)
def test_check_schema_names_the_problem(data: object, problem: str) -> None:
    with pytest.raises(ParseError) as info:
        check_schema(data, SCHEMA, text="answer text")
    assert problem in str(info.value)
    assert "does not match the expected JSON schema" in str(info.value)


def test_check_schema_any_of() -> None:
    schema = {"anyOf": [{"type": "string"}, {"type": "object", "required": ["a"]}]}
    check_schema("x", schema)
    check_schema({"a": 1}, schema)
    with pytest.raises(ParseError, match="matches none of the anyOf"):
        check_schema({"b": 1}, schema)

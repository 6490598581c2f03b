"""Quoting of filter values, and the translation of one storage_options dict per backend."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from skillstream.storage import filters
from skillstream.storage.options import fsspec_options, lance_options, protocol_of


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        ("o'brien", "'o''brien'"),
        ("a\\b", "'a\\b'"),
        ("'; DROP TABLE x; --", "'''; DROP TABLE x; --'"),
        (None, "NULL"),
        (True, "TRUE"),
        (3, "3"),
        (0.5, "0.5"),
        (datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "TIMESTAMP '2024-01-02 03:04:05'"),
    ],
)
def test_literal(value, sql):
    assert filters.literal(value) == sql


@pytest.mark.parametrize("bad", [float("nan"), "a\x00b", object()])
def test_literal_refuses(bad):
    with pytest.raises(ValueError):
        filters.literal(bad)


def test_clauses():
    assert filters.eq("owner_id", "it's") == "owner_id = 'it''s'"
    assert filters.eq("owner_id", None) == "owner_id IS NULL"
    assert filters.eq("odd name", 1) == "`odd name` = 1"
    assert filters.is_in("status", ["a", "b'"]) == "status IN ('a', 'b''')"
    assert filters.is_in("status", []) == "FALSE"
    assert filters.where_all(None, "a = 1") == "a = 1"
    assert filters.where_all("a = 1", "", "b = 2") == "(a = 1) AND (b = 2)"
    assert filters.where_all() is None
    assert filters.ident('we"ird') == '"we""ird"'


def test_protocol_of():
    assert protocol_of("s3://b/p") == "s3"
    assert protocol_of("./x") == ""
    assert protocol_of("memory://x") == "memory"


LANCE_S3 = {
    "aws_access_key_id": "AK",
    "aws_secret_access_key": "SK",
    "region": "eu-west-1",
    "endpoint": "http://127.0.0.1:9000",
    "allow_http": "true",
}


def test_fsspec_options_s3_from_lance_keys():
    assert fsspec_options("s3://b/p", LANCE_S3) == {
        "key": "AK",
        "secret": "SK",
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs": {"region_name": "eu-west-1"},
    }


def test_fsspec_options_s3_aliases_and_passthrough():
    out = fsspec_options(
        "s3://b",
        {
            "key": "AK",
            "secret": "SK",
            "endpoint_url": "http://h",
            "use_ssl": "false",
            "timeout": "5s",
        },
    )
    assert out == {"key": "AK", "secret": "SK", "endpoint_url": "http://h", "use_ssl": False}


def test_fsspec_options_oss_and_local():
    oss = {
        "oss_endpoint": "https://oss-cn-hangzhou.aliyuncs.com",
        "oss_access_key_id": "AK",
        "oss_secret_access_key": "SK",
    }
    assert fsspec_options("oss://b/p", oss) == {
        "endpoint": "https://oss-cn-hangzhou.aliyuncs.com",
        "key": "AK",
        "secret": "SK",
    }
    assert fsspec_options("/tmp/x", LANCE_S3) == {}
    assert fsspec_options("memory://x", LANCE_S3) == {}


def test_lance_options():
    assert lance_options("s3://b", LANCE_S3) == LANCE_S3
    fs_style = {
        "key": "AK",
        "secret": "SK",
        "endpoint_url": "http://127.0.0.1:9000",
        "region_name": "r",
    }
    assert lance_options("s3://b", fs_style) == {
        "aws_access_key_id": "AK",
        "aws_secret_access_key": "SK",
        "endpoint": "http://127.0.0.1:9000",
        "region": "r",
        "allow_http": "true",
    }
    assert lance_options("oss://b", {"endpoint": "https://e", "key": "AK", "secret": "SK"}) == {
        "oss_endpoint": "https://e",
        "oss_access_key_id": "AK",
        "oss_secret_access_key": "SK",
    }
    assert lance_options("/tmp/x", LANCE_S3) is None
    assert lance_options("s3://b", {"allow_http": True}) == {"allow_http": "true"}


def test_options_that_are_not_a_dict_count_as_none():
    assert lance_options("s3://b", dict) is None  # e.g. a settings default of the dict type
    assert fsspec_options("s3://b", None) == {}

"""Fixtures of the task-skill tests: sample conversations, a moto S3 server, settings in tmp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from skillstream.distill.record import ConversationBlock
from skillstream.model import Message
from skillstream.settings import Settings
from tests.servers.s3 import fresh_bucket

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
T0 = datetime(2025, 5, 6, 14, 0, tzinfo=UTC)
BUCKET = "task-skills-test"


def block(
    turns: list[tuple[str, str]],
    *,
    conversation_id: str = "c1",
    owner_id: str = "u1",
    start: datetime = T0,
    session_id: str = "s1",
) -> ConversationBlock:
    """A conversation block from (role, text) pairs, one minute apart."""
    msgs = [
        Message(
            f"{conversation_id}-{session_id}-{i}",
            conversation_id,
            owner_id,
            session_id,
            role,
            "User" if role == "user" else "Assistant",
            text,
            start + timedelta(minutes=i),
        )
        for i, (role, text) in enumerate(turns)
    ]
    return ConversationBlock.of(msgs)


DEPLOY_1 = [
    ("user", "Can you walk me through deploying our Flask app to the staging server?"),
    ("assistant", "Sure. First, run the test suite with pytest and make sure it passes."),
    ("assistant", "Then build the Docker image with docker build -t app:staging ."),
    (
        "assistant",
        "Next, push the image to the registry with docker push registry.local/app:staging.",
    ),
    (
        "assistant",
        "Finally, restart the service on staging with "
        "systemctl restart app and check the health endpoint.",
    ),
    ("user", "It failed at the push step with an authentication error."),
    (
        "assistant",
        "Log in to the registry first with docker login registry.local, then push again.",
    ),
    ("user", "That worked. I always want the health check to run before we announce a deploy."),
]
DEPLOY_2 = [
    ("user", "We need to deploy the Flask app to staging again today."),
    ("assistant", "Run pytest first, then build the image with docker build -t app:staging ."),
    (
        "assistant",
        "Log in with docker login registry.local and "
        "push with docker push registry.local/app:staging.",
    ),
    (
        "assistant",
        "Restart the service with systemctl restart "
        "app and verify the health endpoint returns 200.",
    ),
    ("user", "Great, I prefer that we post the result in the #deploys channel afterwards."),
]
SMALL_TALK = [
    ("user", "Hi! Hope you're doing well."),
    ("assistant", "Hello, how can I help today?"),
    ("user", "I think Lisbon is the most beautiful city in Europe."),
    ("assistant", "Noted! Anything else?"),
    ("user", "Thanks, that's all for now."),
]


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Settings whose stores all live under tmp_path; no config file or environment is read."""
    return Settings.from_keys(home=str(tmp_path / "home"), epoch_interval_s=0.0)


@pytest.fixture
def s3(s3_endpoint):
    """An empty moto with one bucket; returns (endpoint, storage options)."""
    return s3_endpoint, fresh_bucket(s3_endpoint, BUCKET)

"""Fixtures of the services tests: the moto S3 bucket the task-skill tests publish to."""

from tests.distill.conftest import s3  # noqa: F401 - fixture

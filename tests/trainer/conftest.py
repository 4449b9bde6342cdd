"""Fixtures of the trainer's tests."""

import pytest

from tests.trainer_fixtures import shared_mixture


@pytest.fixture(scope="session")
def mixture_dir(tmp_path_factory):
    """The session's tiny mixture (tests.trainer_fixtures.shared_mixture); a test that changes it
    works on a copy."""
    return shared_mixture(tmp_path_factory)

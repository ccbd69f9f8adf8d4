"""Every backend named with --require-backend fails instead of skipping."""

from __future__ import annotations

import pytest

from tests import backends
from tests.backends import BACKENDS, backend_url, remember_required_option


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_the_option_turns_a_skip_into_a_failure(
    name: str, monkeypatch: pytest.MonkeyPatch, pytestconfig: pytest.Config
) -> None:
    if backends.docker_available():
        pytest.skip("a Docker daemon answers: the backend would start, not skip")
    monkeypatch.delenv(BACKENDS[name].env_var, raising=False)
    monkeypatch.delenv("CHATLEDGER_REQUIRE_BACKENDS", raising=False)
    try:
        remember_required_option("")
        with pytest.raises(pytest.skip.Exception):
            backend_url(name)
        remember_required_option(name)
        with pytest.raises(pytest.fail.Exception, match="required backend"):
            backend_url(name)
    finally:
        remember_required_option(pytestconfig.getoption("--require-backend"))

"""Stores that release 0.2 itself wrote, for this release to open.

Once per test session, release 0.2 is built from its commit into an
environment of its own (:mod:`tests.upgrade.release`, kept between runs), and
it writes, on every backend whose tests were selected and can run here, one
store per test that opens it first, each in a namespace of its own
(:mod:`tests.upgrade.stores`). Without the commit (a source tarball) every
test here is skipped; a backend without a server URL is skipped as the other
server tests are (``tests.backends``). The stores are dropped at the end.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import backend_url
from tests.upgrade.racing import RacingPair
from tests.upgrade.release import ReleaseUnavailableError, release_python
from tests.upgrade.stores import Written
from tests.upgrade.targets import TARGETS, Target

#: Release 0.2: the last commit of its tree.
RELEASE_0_2 = "8c4a76d"


@pytest.fixture(scope="session")
def release_0_2_python() -> Path:
    """The interpreter of release 0.2's environment, built on first use."""
    try:
        return release_python(RELEASE_0_2)
    except ReleaseUnavailableError as error:
        pytest.skip(
            f"release 0.2 (commit {RELEASE_0_2}) cannot be built: {error}; run "
            "with the repository's git history (a clone, not a source tarball)"
        )


def _selected(session: pytest.Session) -> list[str]:
    """The targets some selected test of this folder runs on."""
    here = Path(__file__).parent
    names = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and Path(item.path).is_relative_to(here):
            names.add(callspec.params.get("target"))
    return [name for name in TARGETS if name in names]


def _url(target: Target, folder: Path, required: set[str]) -> str:
    """The target's URL; skips without its adapter, driver or server."""
    for module in target.modules:
        if importlib.util.find_spec(module) is None:
            package = target.modules[0].removeprefix("chatledger_")
            pytest.skip(
                f"{target.name}: {module} is not installed: pip install -e "
                f"'./packages/{package}[test]'"
            )
    if target.server is None:
        return target.file_url(folder)
    return backend_url(target.server, required)


@pytest.fixture(scope="session")
def release_0_2_stores(
    request: pytest.FixtureRequest,
    release_0_2_python: Path,
    tmp_path_factory: pytest.TempPathFactory,
    required: set[str],
) -> Iterator[Written]:
    """Release 0.2's stores of every selected target that can run here.

    Written ahead, side by side; under pytest-xdist, where a worker runs the
    tests of some servers only, each target's when its first test asks.
    """
    folder = tmp_path_factory.mktemp("release-0.2")
    urls: dict[str, str] = {}
    outcomes: dict[str, BaseException] = {}
    for name in _selected(request.session):
        try:
            urls[name] = _url(TARGETS[name], folder, required)
        except (pytest.skip.Exception, pytest.fail.Exception) as outcome:
            outcomes[name] = outcome
    written = Written(release_0_2_python, folder, urls, outcomes)
    if not hasattr(request.config, "workerinput"):
        written.start_all()
    try:
        yield written
    finally:
        written.drop()


@pytest.fixture(scope="session")
def racing_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RacingPair]:
    """Two processes of this release that meet a store at the same moment."""
    with RacingPair(tmp_path_factory.mktemp("racing")) as pair:
        yield pair

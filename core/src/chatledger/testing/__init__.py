"""The conformance suite every chatledger repository must pass.

Example (a third-party adapter proves itself with one subclass and one fixture):

    import pytest
    from chatledger.testing import ChatMemoryRepositoryTests

    class TestAcmeRepository(ChatMemoryRepositoryTests):
        supports_atomic_append = True

        @pytest.fixture
        def repository(self):
            repo = AcmeChatMemoryRepository(client, namespace=unique_name())
            yield repo          # must be EMPTY
            repo.drop()

Capabilities are class attributes (``supports_atomic_append``, ``supports_ttl``);
the ``save_many`` tests run when the repository has it.
A subclass may not override a suite test except to mark it
``pytest.mark.xfail(reason=...)``; ``test_no_overrides_DO_NOT_OVERRIDE`` fails
otherwise. Install with ``pip install 'chatledger[testing]'`` and pin its version.
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(
    "chatledger.testing.repository_tests",
    "chatledger.testing.save_many_tests",
    "chatledger.testing.window_tests",
    "chatledger.testing.ttl_tests",
)

from chatledger.testing.guard import check_no_overrides  # noqa: E402
from chatledger.testing.repository_tests import RepositoryContractTests  # noqa: E402
from chatledger.testing.samples import every_kind  # noqa: E402
from chatledger.testing.save_many_tests import SaveManyTests  # noqa: E402
from chatledger.testing.ttl_tests import TTLTests  # noqa: E402
from chatledger.testing.window_tests import WindowMemoryTests, random_turns  # noqa: E402

__all__ = [
    "ChatMemoryRepositoryTests",
    "RepositoryContractTests",
    "SaveManyTests",
    "TTLTests",
    "WindowMemoryTests",
    "every_kind",
    "random_turns",
]

_SUITE = (RepositoryContractTests, WindowMemoryTests, TTLTests, SaveManyTests)


class ChatMemoryRepositoryTests(
    RepositoryContractTests, WindowMemoryTests, TTLTests, SaveManyTests
):
    """The whole suite: subclass it and override the ``repository`` fixture."""

    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:
        """Suite tests are only overridden to mark them ``xfail(reason=...)``."""
        offenders = check_no_overrides(self, _SUITE)
        assert offenders == [], (
            f"{type(self).__name__} overrides suite tests {offenders}; override a "
            "test only to mark it pytest.mark.xfail(reason=...)"
        )

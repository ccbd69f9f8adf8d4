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
            repo.drop_schema()

Capabilities are class attributes (``supports_atomic_append``, ``supports_ttl``);
the ``save_many``, ``count_messages`` and ``find_conversation_ids_page`` tests
run when the repository has them. A subclass may not override a suite test (nor
set its name to ``None``) except to mark it ``pytest.mark.xfail(reason=...)``:
defining such a subclass raises ``TypeError``. Install with
``pip install 'chatledger[testing]'`` and pin its version.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.register_assert_rewrite(
    "chatledger.testing.repository_tests",
    "chatledger.testing.save_many_tests",
    "chatledger.testing.window_tests",
    "chatledger.testing.ttl_tests",
    "chatledger.testing.capability_tests",
    "chatledger.testing.turn_tests",
)

from chatledger.testing.capability_tests import CapabilityTests  # noqa: E402
from chatledger.testing.guard import check_no_overrides  # noqa: E402
from chatledger.testing.repository_tests import RepositoryContractTests  # noqa: E402
from chatledger.testing.samples import every_kind  # noqa: E402
from chatledger.testing.save_many_tests import SaveManyTests  # noqa: E402
from chatledger.testing.ttl_tests import TTLTests  # noqa: E402
from chatledger.testing.turn_tests import TurnTests  # noqa: E402
from chatledger.testing.window_tests import WindowMemoryTests, random_turns  # noqa: E402

__all__ = [
    "CapabilityTests",
    "ChatMemoryRepositoryTests",
    "RepositoryContractTests",
    "SaveManyTests",
    "TTLTests",
    "TurnTests",
    "WindowMemoryTests",
    "every_kind",
    "random_turns",
]

_SUITE = (
    RepositoryContractTests,
    WindowMemoryTests,
    TTLTests,
    CapabilityTests,
    SaveManyTests,
    TurnTests,
)


class ChatMemoryRepositoryTests(
    RepositoryContractTests,
    WindowMemoryTests,
    TTLTests,
    CapabilityTests,
    SaveManyTests,
    TurnTests,
):
    """The whole suite: subclass it and override the ``repository`` fixture."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Checked when the subclass is defined, so that no override (of this
        # check's own test included) can drop a case unnoticed.
        super().__init_subclass__(**kwargs)
        offenders = check_no_overrides(cls, _SUITE)
        if offenders or cls.test_no_overrides_DO_NOT_OVERRIDE is not (
            ChatMemoryRepositoryTests.test_no_overrides_DO_NOT_OVERRIDE
        ):
            raise TypeError(
                f"{cls.__name__} overrides suite tests "
                f"{offenders or ['test_no_overrides_DO_NOT_OVERRIDE']}; override "
                "a test only to mark it pytest.mark.xfail(reason=...)"
            )

    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:
        """Suite tests are only overridden to mark them ``xfail(reason=...)``."""
        offenders = check_no_overrides(self, _SUITE)
        assert offenders == [], (
            f"{type(self).__name__} overrides suite tests {offenders}; override a "
            "test only to mark it pytest.mark.xfail(reason=...)"
        )

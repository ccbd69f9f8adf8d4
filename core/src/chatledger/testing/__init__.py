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

Capabilities are class attributes (``supports_atomic_append``, ``supports_ttl``,
``supports_retention``);
the ``save_many``, ``count_messages``, ``find_conversation_ids_page``, log
(:class:`chatledger.SupportsLog`) and removal
(:class:`chatledger.SupportsLogRemoval`) tests run when the repository has them.
The record tests (:class:`chatledger.SupportsConversationInfo`) are a class of
their own, :class:`ConversationInfoTests`, mixed in beside the suite:
``class TestAcmeRepository(ChatMemoryRepositoryTests, ConversationInfoTests)``. A
subclass may not override a suite test (nor set its name to ``None``), nor a
test of a class it mixes in from here, except to mark it
``pytest.mark.xfail(reason=...)``: defining such a subclass raises
``TypeError``. Install with
``pip install 'chatledger[testing]'`` and pin its version.

An async repository runs the same cases through
:class:`AsyncChatMemoryRepositoryTests`, overriding ``async_repository``
instead (and ``make_async_repository_with_ttl`` for TTLs); its memory and
turn cases drive the async memories (``async with memory.turn(...)``). Its
fixtures may await on the test class's event loop, the ``async_runner``
fixture:

    class TestAcmeAsyncRepository(AsyncChatMemoryRepositoryTests):
        supports_atomic_append = True

        @pytest.fixture
        def async_repository(self, async_runner):
            repo = AsyncAcmeChatMemoryRepository.from_url(URL, namespace=unique_name())
            yield repo          # must be EMPTY
            async_runner.run(repo.drop_schema())
            async_runner.run(repo.aclose())
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from chatledger.retention import Retention

pytest.register_assert_rewrite(
    "chatledger.testing.repository_tests",
    "chatledger.testing.save_many_tests",
    "chatledger.testing.window_tests",
    "chatledger.testing.ttl_tests",
    "chatledger.testing.capability_tests",
    "chatledger.testing.conversation_info_tests",
    "chatledger.testing.log_tests",
    "chatledger.testing.log_removal_tests",
    "chatledger.testing.retention_tests",
    "chatledger.testing.turn_tests",
)

from chatledger.testing.async_runner import (  # noqa: E402
    EventLoopThread,
    RepositoryFacade,
    repository_facade,
)
from chatledger.testing.capability_tests import CapabilityTests  # noqa: E402
from chatledger.testing.conversation_info_tests import (  # noqa: E402
    ConversationInfoTests,
)
from chatledger.testing.guard import check_no_overrides  # noqa: E402
from chatledger.testing.log_removal_tests import LogRemovalTests  # noqa: E402
from chatledger.testing.log_tests import LogTests  # noqa: E402
from chatledger.testing.repository_tests import RepositoryContractTests  # noqa: E402
from chatledger.testing.retention_tests import RetentionTests  # noqa: E402
from chatledger.testing.samples import every_kind  # noqa: E402
from chatledger.testing.save_many_tests import SaveManyTests  # noqa: E402
from chatledger.testing.ttl_tests import TTLTests  # noqa: E402
from chatledger.testing.turn_tests import TurnTests  # noqa: E402
from chatledger.testing.twins import assert_same_operations  # noqa: E402
from chatledger.testing.window_tests import WindowMemoryTests, random_turns  # noqa: E402

__all__ = [
    "AsyncChatMemoryRepositoryTests",
    "CapabilityTests",
    "ChatMemoryRepositoryTests",
    "ConversationInfoTests",
    "LogRemovalTests",
    "LogTests",
    "RepositoryContractTests",
    "RetentionTests",
    "SaveManyTests",
    "TTLTests",
    "TurnTests",
    "WindowMemoryTests",
    "assert_same_operations",
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
    LogTests,
    LogRemovalTests,
    RetentionTests,
)

#: Test classes mixed in beside the suite, held to the same override rule.
_MIXINS = (ConversationInfoTests,)


def _suite_of(subject: object) -> tuple[type, ...]:
    """The suite classes whose tests ``subject`` (a class or an instance) runs."""
    cls = subject if isinstance(subject, type) else type(subject)
    return _SUITE + tuple(mixin for mixin in _MIXINS if issubclass(cls, mixin))


class ChatMemoryRepositoryTests(
    RepositoryContractTests,
    WindowMemoryTests,
    TTLTests,
    CapabilityTests,
    SaveManyTests,
    TurnTests,
    LogTests,
    LogRemovalTests,
    RetentionTests,
):
    """The whole suite: subclass it and override the ``repository`` fixture."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Checked when the subclass is defined, so that no override (of this
        # check's own test included) can drop a case unnoticed.
        super().__init_subclass__(**kwargs)
        offenders = check_no_overrides(cls, _suite_of(cls))
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
        offenders = check_no_overrides(self, _suite_of(self))
        assert offenders == [], (
            f"{type(self).__name__} overrides suite tests {offenders}; override a "
            "test only to mark it pytest.mark.xfail(reason=...)"
        )


#: Fixtures the async suite keeps, and the ones a subclass overrides instead.
_ASYNC_FIXTURES = (
    ("repository", "async_repository"),
    ("make_repository_with_ttl", "make_async_repository_with_ttl"),
    ("make_repository_with_retention", "make_async_repository_with_retention"),
)


class AsyncChatMemoryRepositoryTests(ChatMemoryRepositoryTests):
    """The whole suite, the same cases, for an async repository.

    Override the ``async_repository`` fixture (and, with ``supports_ttl``,
    ``make_async_repository_with_ttl``; with ``supports_retention``,
    ``make_async_repository_with_retention``). Each case drives the repository
    through a facade that awaits every call on the class's event loop
    (``async_runner``), and its memories are the async ones. The same
    override rule as :class:`ChatMemoryRepositoryTests` holds, and the
    ``repository`` fixtures stay the suite's own.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, instead in _ASYNC_FIXTURES:
            # Fixtures bind on attribute access: compare where each is defined.
            owner = next(k for k in cls.__mro__ if name in vars(k))
            if owner is not AsyncChatMemoryRepositoryTests:
                raise TypeError(
                    f"{cls.__name__} overrides the fixture {name!r}; override "
                    f"{instead!r} instead"
                )

    @pytest.fixture(scope="class")
    @classmethod
    def async_runner(cls) -> Iterator[EventLoopThread]:
        """The event loop the class's repositories and cases run on."""
        runner = EventLoopThread()
        yield runner
        runner.close()

    @pytest.fixture
    def async_repository(self) -> Any:
        """Yield an EMPTY async repository; override it in your subclass."""
        raise NotImplementedError(
            "Override the `async_repository` fixture to yield an empty "
            "AsyncChatMemoryRepository"
        )

    @pytest.fixture
    def make_async_repository_with_ttl(self) -> Callable[[timedelta], Any]:
        """Return a factory of empty async repositories with a TTL, if supported."""
        raise NotImplementedError(
            "Override `make_async_repository_with_ttl` when supports_ttl"
        )

    @pytest.fixture
    def make_async_repository_with_retention(self) -> Callable[[Retention], Any]:
        """Return a factory of empty async repositories with a retention."""
        raise NotImplementedError(
            "Override `make_async_repository_with_retention` when supports_retention"
        )

    @pytest.fixture
    def repository(
        self, async_repository: Any, async_runner: EventLoopThread
    ) -> RepositoryFacade:
        """The async repository behind the facade the cases call."""
        return repository_facade(async_repository, async_runner)

    @pytest.fixture
    def make_repository_with_ttl(
        self, request: pytest.FixtureRequest, async_runner: EventLoopThread
    ) -> Callable[[timedelta], RepositoryFacade]:
        """Facades over the repositories ``make_async_repository_with_ttl`` makes."""
        make = request.getfixturevalue("make_async_repository_with_ttl")
        return lambda ttl: repository_facade(make(ttl), async_runner)

    @pytest.fixture
    def make_repository_with_retention(
        self, request: pytest.FixtureRequest, async_runner: EventLoopThread
    ) -> Callable[[Retention], RepositoryFacade]:
        """Facades over what ``make_async_repository_with_retention`` makes."""
        make = request.getfixturevalue("make_async_repository_with_retention")
        return lambda retention: repository_facade(make(retention), async_runner)

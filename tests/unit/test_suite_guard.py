"""The conformance suite refuses a subclass that drops one of its cases."""

from __future__ import annotations

from typing import Any

import pytest

from chatledger.testing import (
    AsyncChatMemoryRepositoryTests,
    ChatMemoryRepositoryTests,
)


def test_a_case_set_to_none_is_refused() -> None:
    with pytest.raises(TypeError, match="test_save_all_replaces_previous_messages"):

        class Dropping(ChatMemoryRepositoryTests):
            test_save_all_replaces_previous_messages = None  # type: ignore[assignment]


def test_a_plain_override_is_refused() -> None:
    with pytest.raises(TypeError, match="test_save_all_replaces_previous_messages"):

        class Overriding(ChatMemoryRepositoryTests):
            def test_save_all_replaces_previous_messages(self, repository: Any) -> None:
                pass


def test_the_check_itself_cannot_be_dropped() -> None:
    with pytest.raises(TypeError, match="test_no_overrides_DO_NOT_OVERRIDE"):

        class Silencing(ChatMemoryRepositoryTests):
            test_no_overrides_DO_NOT_OVERRIDE = None  # type: ignore[assignment]


def test_an_override_marked_xfail_with_a_reason_is_allowed() -> None:
    class Limited(ChatMemoryRepositoryTests):
        @pytest.mark.xfail(reason="the backend cannot do this")
        def test_save_all_replaces_previous_messages(self, repository: Any) -> None:
            pass

    assert Limited.test_save_all_replaces_previous_messages is not None


def test_the_async_suite_refuses_a_dropped_case_too() -> None:
    with pytest.raises(TypeError, match="test_save_all_replaces_previous_messages"):

        class Overriding(AsyncChatMemoryRepositoryTests):
            def test_save_all_replaces_previous_messages(self) -> None:  # type: ignore[override]
                pass

    with pytest.raises(TypeError, match="test_no_overrides_DO_NOT_OVERRIDE"):

        class Silencing(AsyncChatMemoryRepositoryTests):
            test_no_overrides_DO_NOT_OVERRIDE = None  # type: ignore[assignment]


def test_the_async_suite_keeps_its_facade_fixtures() -> None:
    with pytest.raises(TypeError, match="override 'async_repository' instead"):

        class Bypassing(AsyncChatMemoryRepositoryTests):
            @pytest.fixture
            def repository(self) -> None:
                return None

    with pytest.raises(TypeError, match="'make_async_repository_with_ttl'"):

        class BypassingTTL(AsyncChatMemoryRepositoryTests):
            @pytest.fixture
            def make_repository_with_ttl(self) -> None:
                return None


def test_the_async_suite_runs_the_same_cases() -> None:
    def cases(cls: type) -> set[str]:
        return {name for name in dir(cls) if name.startswith("test_")}

    assert cases(AsyncChatMemoryRepositoryTests) == cases(ChatMemoryRepositoryTests)

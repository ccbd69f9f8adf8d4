"""The conformance suite refuses a subclass that drops one of its cases."""

from __future__ import annotations

import pytest

from chatledger.testing import ChatMemoryRepositoryTests


def test_a_case_set_to_none_is_refused() -> None:
    with pytest.raises(TypeError, match="test_save_all_replaces_previous_messages"):

        class Dropping(ChatMemoryRepositoryTests):
            test_save_all_replaces_previous_messages = None  # type: ignore[assignment]


def test_a_plain_override_is_refused() -> None:
    with pytest.raises(TypeError, match="test_save_all_replaces_previous_messages"):

        class Overriding(ChatMemoryRepositoryTests):
            def test_save_all_replaces_previous_messages(self) -> None:
                pass


def test_the_check_itself_cannot_be_dropped() -> None:
    with pytest.raises(TypeError, match="test_no_overrides_DO_NOT_OVERRIDE"):

        class Silencing(ChatMemoryRepositoryTests):
            test_no_overrides_DO_NOT_OVERRIDE = None  # type: ignore[assignment]


def test_an_override_marked_xfail_with_a_reason_is_allowed() -> None:
    class Limited(ChatMemoryRepositoryTests):
        @pytest.mark.xfail(reason="the backend cannot do this")
        def test_save_all_replaces_previous_messages(self) -> None:
            pass

    assert Limited.test_save_all_replaces_previous_messages is not None

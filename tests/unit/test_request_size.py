"""The size check every adapter runs before a write: one arithmetic, one refusal."""

from __future__ import annotations

import pytest

from chatledger import MessageTooLargeError
from chatledger.adapters import RequestLimit, encoded_size


def test_encoded_size_counts_utf8_bytes_and_numbers() -> None:
    assert encoded_size(["é", b"ab", None, 7, bytearray(3)]) == 2 + 2 + 0 + 8 + 3
    assert encoded_size([]) == 0


def test_a_request_fits_up_to_the_limit_less_the_overhead() -> None:
    packet = RequestLimit(100, overhead=10, setting="max_allowed_packet")
    assert packet.fits(90)
    assert not packet.fits(91)
    packet.check(90, "the batch")
    with pytest.raises(MessageTooLargeError) as caught:
        packet.check(91, "the batch of 'c1'")
    text = str(caught.value)
    assert "the batch of 'c1'" in text
    assert "about 101 bytes" in text
    assert "at most 100 " in text
    assert "max_allowed_packet" in text
    assert isinstance(caught.value, ValueError)

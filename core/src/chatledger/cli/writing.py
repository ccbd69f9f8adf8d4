"""What the commands that write into a store (import, copy) share."""

from __future__ import annotations

from chatledger.bulk import BulkSaveError
from chatledger.cli.errors import UsageError
from chatledger.connect import redact_url, url_scheme

__all__ = ["not_written", "refuse_in_process", "written_before"]


def refuse_in_process(url: str, command: str) -> None:
    """Refuse to write where nothing outlives this process."""
    family = url_scheme(url).partition("+")[0]
    path, _, query = url.partition("://")[2].partition("?")
    in_memory = family == "memory" or (
        family in ("sqlite", "duckdb")
        and (path in ("", "/", "/:memory:") or "mode=memory" in query)
    )
    if in_memory:
        raise UsageError(
            f"{redact_url(url)} keeps data in this process only: {command} would "
            "report success and the data would be gone when it exits; give a "
            "store that outlives it, such as sqlite:///chat.db"
        )


def not_written(exc: BulkSaveError, verb: str, url: str) -> str:
    """``conversation 'a' was not copied to URL``, or the range of a batch."""
    ids = exc.conversation_ids
    if len(ids) == 1:
        return f"conversation {ids[0]!r} was not {verb} {redact_url(url)}"
    return (
        f"conversations {ids[0]!r} to {ids[-1]!r} (one batch of {len(ids)}, none "
        f"of it written) were not {verb} {redact_url(url)}"
    )


def written_before(exc: BulkSaveError) -> str:
    """``the 3 conversations before it were``, to end a bulk write's error."""
    these = "it" if len(exc.conversation_ids) == 1 else "them"
    return f"the {exc.saved} conversations before {these} were"

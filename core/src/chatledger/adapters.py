"""The adapter API: everything a repository for another database takes from core.

Example:
    from chatledger.adapters import (
        AppendResult,
        ClosingContext,
        StoredWindow,
        plan_append,
        stamp_messages,
        validate_conversation_id,
        validate_messages,
    )

An adapter (chatledger's own or a third party's) imports from this module
only, and depends on ``chatledger>=0.2,<0.3``: what is named here keeps its
meaning within a minor version. It holds

- the codec (``codec.to_json`` / ``codec.from_json``, ``to_dict`` /
  ``from_dict``, and ``from_columns`` for an adapter that keeps the id, role,
  text and time in columns of their own): one lossless encoding of a message;
- validation before any I/O (:func:`validate_conversation_id`,
  :func:`validate_messages`, :func:`validate_page_request`) and stamping
  (:func:`stamp_messages`, :func:`utc_now`);
- the window (:class:`Window`, :func:`apply_window` for read-modify-write,
  :func:`system_key` for server-side translations of rule 1) and the append
  planner (:func:`plan_append` and its :class:`StoredWindow`,
  :class:`StoredEntry`, :class:`AppendPlan`), which every adapter that plans
  in Python calls instead of reworking the window arithmetic, and how far it
  reads first (:data:`TURN_SLACK`, :data:`TOKEN_WINDOW_FIRST_READ`), for an
  append translated to run in the server;
- the log (see :class:`AsyncSupportsLog`): the window as a view of a
  conversation's newest rows (:class:`TailView`, fed :class:`LogRow`, with
  the system messages :func:`current_system` picks) and message pages
  (:func:`check_message_page` before any I/O, :func:`message_page` to build
  a :class:`MessagePage`, :data:`DEFAULT_MESSAGE_PAGE_SIZE`);
- the record of evicted ids that keeps a late retry a no-op
  (:data:`EVICTED_IDS_KEPT`, :class:`EvictedIds`, :func:`kept_newest`,
  :func:`list_trim_count`, :func:`trim_due`, :func:`trim_below`; see
  :mod:`chatledger.evicted_ids`);
- conversation records (see :class:`AsyncSupportsConversationInfo`): the
  record and its page (:class:`ConversationInfo`,
  :class:`ConversationInfoPage`, :data:`UNSET` for an argument left out), the
  checks before any I/O (:func:`check_conversation_info`, which gives a
  :class:`ConversationInfoUpdate`, and :func:`check_find_conversations`,
  which gives a :class:`ConversationQuery`: what matches, in which order,
  from where, and the page with its cursor), :func:`metadata_matches` for a
  store that filters in Python, and the cursor codec
  (:func:`encode_conversation_cursor`, :func:`decode_conversation_cursor`);
- for async adapters: the protocols (:class:`AsyncChatMemoryRepository`
  and the ``AsyncSupports...`` capabilities, among them
  :class:`AsyncSupportsSchemaUpgrade` for a backend whose schema grew since
  an earlier release), :func:`plan_append_async`
  (the planner over awaited reads, with :class:`AsyncStoredWindow`),
  :class:`AsyncClosingContext` (``async with`` awaits ``aclose()``),
  :func:`settled` (a cancelled write waits for the answer to a request that
  commits, so it has landed or not when the cancellation returns) and
  :class:`LoopLocal` (a value per event loop, made on the loop's first use
  and closed on that loop, so one async repository serves any loop;
  :class:`LoopClosedFirstWarning` says when a loop closed before its value
  could be);
- the shared behaviours: :class:`ClosingContext` (``with`` closes),
  :class:`FaultPoints` (test hooks at the named steps of a write),
  :func:`to_ttl` (one meaning of ``ttl``);
- the size check before a write: :class:`RequestLimit` (does a request of
  this many bytes fit under a server's cap, else
  :class:`MessageTooLargeError` naming both) and :func:`encoded_size`;
- the benchmark hook: a repository that can make its driver's floor (one
  bare INSERT, one ordered SELECT, on its own table or keys) offers
  ``benchmark_floor()`` returning a :class:`BenchmarkFloor`; it is what
  ``chatledger bench URL`` sets beside the adapter's figures
  (:class:`SupportsBenchmarkFloor`, optional);
- the errors an adapter raises: :class:`ContentionError` when it gives up
  under contention, :class:`InvalidNameError` for a bad table, prefix or
  label, :class:`InvalidOptionError` for an option the adapter does not
  take, :class:`InvalidConversationInfoError` for a bad owner, metadata or
  filter, :class:`StoreNotFoundError` when a read-only open finds no store,
  :class:`MessageTooLargeError`, :class:`InvalidTTLError`,
  :class:`InvalidUrlError`, :class:`UnknownBackendError` (a scheme the
  adapter does not serve) and :class:`MissingDriverError` (with
  :func:`install_hint`, the ``pip install`` line of a driver) for a URL;
  :func:`redact_url` keeps passwords out of messages.

An adapter proves itself by passing the conformance suite,
:class:`chatledger.testing.ChatMemoryRepositoryTests`.
"""

from __future__ import annotations

from chatledger import codec
from chatledger.append_plan import (
    TOKEN_WINDOW_FIRST_READ,
    TURN_SLACK,
    AppendPlan,
    StoredEntry,
    StoredWindow,
    needs_stored_system,
    plan_append,
    rows_to_peek,
)
from chatledger.async_append_plan import AsyncStoredWindow, plan_append_async
from chatledger.async_repository import (
    AsyncChatMemoryRepository,
    AsyncSupportsConversationInfo,
    AsyncSupportsConversationPages,
    AsyncSupportsCountMessages,
    AsyncSupportsLog,
    AsyncSupportsSchemaUpgrade,
    AsyncSupportsWindowAppend,
    is_async_repository,
)
from chatledger.benchmark import BenchmarkFloor, SupportsBenchmarkFloor
from chatledger.closing import AsyncClosingContext, ClosingContext
from chatledger.connect import install_hint, redact_url
from chatledger.conversation_info import (
    DEFAULT_CONVERSATION_PAGE_SIZE,
    MAX_METADATA_BYTES,
    MAX_OWNER_LENGTH,
    UNSET,
    ConversationInfo,
    ConversationInfoPage,
    ConversationInfoUpdate,
    ConversationQuery,
    JsonScalar,
    Unset,
    check_conversation_info,
    check_find_conversations,
    decode_conversation_cursor,
    encode_conversation_cursor,
    filter_fingerprint,
    listing_key,
    metadata_matches,
    validate_metadata,
    validate_metadata_filter,
    validate_owner,
    validate_updated_before,
)
from chatledger.errors import (
    ChatLedgerError,
    ContentionError,
    InvalidConversationInfoError,
    InvalidMessageError,
    InvalidNameError,
    InvalidOptionError,
    InvalidPageError,
    InvalidTTLError,
    InvalidUrlError,
    MessageTooLargeError,
    MissingDriverError,
    StoreNotFoundError,
    UnknownBackendError,
)
from chatledger.evicted_ids import (
    EVICTED_IDS_KEPT,
    EVICTED_IDS_TRIM_STEP,
    EvictedIds,
    kept_newest,
    list_trim_count,
    trim_below,
    trim_due,
)
from chatledger.faults import FAULT_POINTS, FaultPoints
from chatledger.loop_local import LoopClosedFirstWarning, LoopLocal
from chatledger.message_pages import (
    DEFAULT_MESSAGE_PAGE_SIZE,
    check_message_page,
    message_page,
)
from chatledger.messages import JsonValue, Message, Role
from chatledger.repository import (
    AppendResult,
    ConversationPage,
    MessagePage,
    SupportsConversationInfo,
)
from chatledger.request_size import RequestLimit, encoded_size
from chatledger.retention import Retention, to_retention
from chatledger.settling import settled
from chatledger.ttl import to_ttl
from chatledger.validation import (
    MAX_CONVERSATION_ID_BYTES,
    MAX_PAGE_SIZE,
    stamp_messages,
    utc_now,
    validate_conversation_id,
    validate_message_ids,
    validate_messages,
    validate_page_request,
    validate_removal_count,
)
from chatledger.window import (
    Window,
    apply_window,
    count_evictions,
    merge_system,
    system_key,
)
from chatledger.window_view import (
    LogRow,
    TailView,
    checked_window,
    current_system,
    view_reads,
)

__all__ = [
    "DEFAULT_CONVERSATION_PAGE_SIZE",
    "DEFAULT_MESSAGE_PAGE_SIZE",
    "EVICTED_IDS_KEPT",
    "EVICTED_IDS_TRIM_STEP",
    "FAULT_POINTS",
    "MAX_CONVERSATION_ID_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_OWNER_LENGTH",
    "MAX_PAGE_SIZE",
    "TOKEN_WINDOW_FIRST_READ",
    "TURN_SLACK",
    "UNSET",
    "AppendPlan",
    "AppendResult",
    "AsyncChatMemoryRepository",
    "AsyncClosingContext",
    "AsyncStoredWindow",
    "AsyncSupportsConversationInfo",
    "AsyncSupportsConversationPages",
    "AsyncSupportsCountMessages",
    "AsyncSupportsLog",
    "AsyncSupportsSchemaUpgrade",
    "AsyncSupportsWindowAppend",
    "BenchmarkFloor",
    "ChatLedgerError",
    "ClosingContext",
    "ContentionError",
    "ConversationInfo",
    "ConversationInfoPage",
    "ConversationInfoUpdate",
    "ConversationPage",
    "ConversationQuery",
    "EvictedIds",
    "FaultPoints",
    "InvalidConversationInfoError",
    "InvalidMessageError",
    "InvalidNameError",
    "InvalidOptionError",
    "InvalidPageError",
    "InvalidTTLError",
    "InvalidUrlError",
    "JsonScalar",
    "JsonValue",
    "LogRow",
    "LoopClosedFirstWarning",
    "LoopLocal",
    "Message",
    "MessagePage",
    "MessageTooLargeError",
    "MissingDriverError",
    "RequestLimit",
    "Retention",
    "Role",
    "StoreNotFoundError",
    "StoredEntry",
    "StoredWindow",
    "SupportsBenchmarkFloor",
    "SupportsConversationInfo",
    "TailView",
    "UnknownBackendError",
    "Unset",
    "Window",
    "apply_window",
    "check_conversation_info",
    "check_find_conversations",
    "check_message_page",
    "checked_window",
    "codec",
    "count_evictions",
    "current_system",
    "decode_conversation_cursor",
    "encode_conversation_cursor",
    "encoded_size",
    "filter_fingerprint",
    "install_hint",
    "is_async_repository",
    "kept_newest",
    "list_trim_count",
    "listing_key",
    "merge_system",
    "message_page",
    "metadata_matches",
    "needs_stored_system",
    "plan_append",
    "plan_append_async",
    "redact_url",
    "rows_to_peek",
    "settled",
    "stamp_messages",
    "system_key",
    "to_retention",
    "to_ttl",
    "trim_below",
    "trim_due",
    "utc_now",
    "validate_conversation_id",
    "validate_message_ids",
    "validate_messages",
    "validate_metadata",
    "validate_metadata_filter",
    "validate_owner",
    "validate_page_request",
    "validate_removal_count",
    "validate_updated_before",
    "view_reads",
]

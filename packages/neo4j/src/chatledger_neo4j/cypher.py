"""The Cypher text of every query the repository runs, for one pair of labels.

Example:
    from chatledger_neo4j.cypher import Statements

    statements = Statements("Conversation", "Message")
    statements.lock            # MERGE the conversation and write-lock it
    statements.read_all        # every message of a conversation, by sequence

Labels cannot be query parameters, so they are the only text that reaches a
query from outside: each is checked by full match against
``[A-Za-z_][A-Za-z0-9_]*`` (at most 64 characters) and then backquoted. Every
value (conversation id, message ids, payloads, limits) is a bound parameter.

The model, one node per conversation and one node per message::

    (:Conversation {id, next_seq, message_count, size_total, size_counter,
                    version, evicted_ids, emptied})
    (:Message {conversation_id, id, seq, role, payload, size, size_counter})

``evicted_ids`` is the conversation's record of evicted message ids
(:mod:`chatledger.evicted_ids`): the ids its appends took out of the window,
oldest first, at most :data:`chatledger.adapters.EVICTED_IDS_KEPT` of them
(the list :func:`chatledger.adapters.kept_newest` makes, sliced on the server
so the record never travels to the client). An append reads which of its ids
are in it and extends it in its own statements. ``emptied`` marks a
conversation whose window left no message: its node stays for the record, but
it is not listed.

Why one JSON payload per message and not child nodes (metadata, tool calls,
tool responses and media as nodes of their own, as other Neo4j chat stores do):

- Neo4j properties hold only scalars and homogeneous lists of them, so nested
  metadata, ``None`` inside lists and big integers cannot be stored as
  properties without a second encoding; the core codec already is one, it is
  lossless, versioned and shared with every other backend.
- A message is read and written whole. Child nodes would turn every read into
  a fan-out of optional matches (whose cartesian products duplicate entries)
  and every write into several node and relationship creations.
- Order inside a message (tool calls, media) is list order in the payload, not
  an ``idx`` property that has to be kept right.

What the window and the queries need stays in plain properties beside the
payload: ``conversation_id``, ``id``, ``seq``, ``role`` and the stored ``size``
with the name of its measure. Messages point to their conversation by
``conversation_id`` rather than by a relationship: every read seeks a composite
index on it, and appends do not add relationships to one ever denser node.

Schema (created by :attr:`Statements.schema`, each ``IF NOT EXISTS``):

- a uniqueness constraint on ``Conversation.id``, which makes concurrent
  ``MERGE`` of one conversation create one node;
- a uniqueness constraint on ``Message (conversation_id, id)``: the message id
  lookups that make a retried append a no-op seek its index;
- a range index on ``Message (conversation_id, seq)``: reading a conversation
  in order and paging its oldest messages seek it;
- a range index on ``Message (conversation_id, role)``: reading the system
  messages of a conversation seeks it.

Each query on messages names its index with ``USING INDEX SEEK``. The cost
planner estimates rows from index samples, which a new or fast-growing store
does not have yet; with estimates near zero it chose full index scans, and a
cached plan is kept until the statistics drift far enough. The reads in
sequence order say ``ORDER BY m.conversation_id, m.seq``: the conversation id
is fixed by the seek, so this is sequence order, and it is the index's own
order, so rows stream from the seek and ``LIMIT`` stops it early instead of
sorting the whole conversation.
"""

from __future__ import annotations

import re
from typing import LiteralString

from chatledger.adapters import (
    InvalidNameError,
)

__all__ = [
    "AWAIT_INDEX",
    "LABEL_PATTERN",
    "Statements",
    "quote_label",
    "validate_label",
]

#: Waits (up to five minutes) until the index named ``$name`` is online.
AWAIT_INDEX: LiteralString = "CALL db.awaitIndex($name, 300)"
#: What a label may look like (full match); 64 characters at most.
LABEL_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def validate_label(label: object, what: str = "label") -> str:
    """Return ``label`` if it is an allowed Neo4j label, else raise.

    Raises:
        InvalidNameError: ``label`` is not a ``str`` fully matching
            :data:`LABEL_PATTERN`.
    """
    if not isinstance(label, str) or LABEL_PATTERN.fullmatch(label) is None:
        raise InvalidNameError(
            f"{what} must match [A-Za-z_][A-Za-z0-9_]* (at most 64 characters), "
            f"not {label!r}"
        )
    return label


def quote_label(label: str) -> str:
    """Backquote a label already checked by :func:`validate_label`."""
    return f"`{validate_label(label)}`"


def _text(template: str, **labels: str) -> LiteralString:
    # The driver types queries as LiteralString; the only non-literal parts are
    # labels and schema names built from them, all checked by validate_label.
    text: LiteralString = template.format(**labels)
    return text


class Statements:
    """Every query of the repository, built once for a pair of labels.

    Args:
        conversation_label: The label of conversation nodes.
        message_label: The label of message nodes.

    Raises:
        InvalidNameError: a label is not allowed, or both labels are the same.
    """

    def __init__(self, conversation_label: str, message_label: str) -> None:
        """Validate both labels and build every query."""
        conversation = validate_label(conversation_label, "conversation_label")
        message = validate_label(message_label, "message_label")
        if conversation == message:
            raise InvalidNameError(
                "conversation_label and message_label must differ, both are "
                f"{conversation!r}"
            )
        self.conversation_label = conversation
        self.message_label = message
        self.index_names = {
            "conversation_id": f"chatledger_conversation_{conversation}_id",
            "message_id": f"chatledger_message_{message}_id",
            "message_seq": f"chatledger_message_{message}_seq",
            "message_role": f"chatledger_message_{message}_role",
        }
        names = {key: f"`{name}`" for key, name in self.index_names.items()}
        names["C"] = quote_label(conversation)
        names["M"] = quote_label(message)

        def text(template: str) -> LiteralString:
            return _text(template, **names)

        self.schema = (
            text(
                "CREATE CONSTRAINT {conversation_id} IF NOT EXISTS "
                "FOR (c:{C}) REQUIRE c.id IS UNIQUE"
            ),
            text(
                "CREATE CONSTRAINT {message_id} IF NOT EXISTS "
                "FOR (m:{M}) REQUIRE (m.conversation_id, m.id) IS UNIQUE"
            ),
            text(
                "CREATE INDEX {message_seq} IF NOT EXISTS "
                "FOR (m:{M}) ON (m.conversation_id, m.seq)"
            ),
            text(
                "CREATE INDEX {message_role} IF NOT EXISTS "
                "FOR (m:{M}) ON (m.conversation_id, m.role)"
            ),
        )
        self.drop_schema = (
            text("DROP CONSTRAINT {conversation_id} IF EXISTS"),
            text("DROP CONSTRAINT {message_id} IF EXISTS"),
            text("DROP INDEX {message_seq} IF EXISTS"),
            text("DROP INDEX {message_role} IF EXISTS"),
        )
        # Writing a property takes the node's write lock; every write does
        # this first, so sequence and counters are read only while it is held.
        # The value is new for every write, even across a delete and
        # re-create, so a reader that sees the same version before and after
        # the messages knows no write committed in between.
        lock = (
            "MERGE (c:{C} {{id: $cid}}) "
            "ON CREATE SET c.next_seq = 0, c.message_count = 0 "
            "SET c.version = randomUUID() "
        )
        self.lock = text(lock)
        self.lock_existing = text(
            "MATCH (c:{C} {{id: $cid}}) "
            "SET c.version = randomUUID() "
            "RETURN count(c) AS found"
        )
        page = (
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq > $after "
            "AND m.role <> $system "
            "RETURN [m.id, m.seq, m.role, m.size, m.size_counter, "
            "CASE WHEN $counter IS NOT NULL "
            "AND coalesce(m.size_counter, '') <> $counter "
            "THEN m.payload END] AS entry "
            "ORDER BY m.conversation_id, m.seq LIMIT $limit"
        )
        # What an append reads, in one statement once the lock is held: the
        # COLLECT subqueries sit above the SET in the plan, so they run after
        # it (the server tests check the plan). Entries of the page are
        # [id, seq, role, size, size_counter, payload or null].
        self.probe = text(
            lock + "RETURN c.next_seq AS next_seq, "
            "coalesce(c.message_count, 0) AS message_count, "
            "c.size_total AS size_total, c.size_counter AS size_counter, "
            "[i IN $ids WHERE i IN coalesce(c.evicted_ids, [])] AS evicted, "
            "COLLECT {{ MATCH (k:{M}) USING INDEX SEEK k:{M}(conversation_id, id) "
            "WHERE k.conversation_id = $cid AND k.id IN $ids RETURN k.id }} "
            "AS known, "
            "COLLECT {{ MATCH (s:{M}) USING INDEX SEEK s:{M}(conversation_id, role) "
            "WHERE s.conversation_id = $cid AND s.role = $system "
            "RETURN s.payload ORDER BY s.seq }} AS system, "
            "COLLECT {{ " + page.replace("$after", "-1") + " }} AS page"
        )
        self.read_page = text(page)
        self.read_sizes = text(
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 "
            "AND m.role <> $system "
            "RETURN m.size AS size, m.size_counter AS size_counter, "
            "CASE WHEN coalesce(m.size_counter, '') <> $counter "
            "THEN m.payload END AS payload"
        )
        self.read_all = text(
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 "
            "RETURN m.payload AS payload ORDER BY m.conversation_id, m.seq"
        )
        # A conversation as one write left it, in one statement: the version,
        # then the messages, then the version again. Each aggregation is a
        # barrier: the server finishes one step before it starts the next.
        self.read_snapshot = text(
            "OPTIONAL MATCH (c:{C} {{id: $cid}}) "
            "WITH collect(c.version) AS before "
            "OPTIONAL MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 "
            "WITH before, m ORDER BY m.conversation_id, m.seq "
            "WITH before, collect(m.payload) AS payloads, "
            "count(m) AS messages "
            "OPTIONAL MATCH (c:{C} {{id: $cid}}) "
            "RETURN before, payloads, messages, collect(c.version) AS after"
        )
        # A conversation that a window emptied keeps its node for its record
        # of evicted ids, and is not listed.
        self.list_ids = text("MATCH (c:{C}) WHERE c.emptied IS NULL RETURN c.id AS id")
        #: Pages of conversation ids in id order, on the uniqueness index.
        self.first_ids_page = text(
            "MATCH (c:{C}) WHERE c.id IS NOT NULL AND c.emptied IS NULL "
            "RETURN c.id AS id ORDER BY id LIMIT $limit"
        )
        self.ids_page_after = text(
            "MATCH (c:{C}) WHERE c.id > $after AND c.emptied IS NULL "
            "RETURN c.id AS id ORDER BY id LIMIT $limit"
        )
        #: A conversation's messages counted on the sequence index, unread.
        self.count_messages = text(
            "OPTIONAL MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 "
            "RETURN count(m) AS n"
        )
        counters = (
            "MATCH (c:{C} {{id: $cid}}) "
            "SET c.next_seq = $next_seq, c.message_count = $message_count, "
            "c.size_total = $size_total, c.size_counter = $size_counter"
        )
        # An append's writes in one statement: the counters, the record of
        # evicted ids (its newest $evicted_kept, as kept_newest keeps them),
        # the new messages (MERGE: a retried append never doubles one), the
        # evicted ones gone.
        self.append = text(
            counters + ", c.emptied = $emptied, "
            "c.evicted_ids = CASE WHEN size($evicted) = 0 THEN c.evicted_ids "
            "ELSE (coalesce(c.evicted_ids, []) + $evicted)[-$evicted_kept..] END "
            "FOREACH (row IN $rows | "
            "MERGE (m:{M} {{conversation_id: $cid, id: row.id}}) "
            "ON CREATE SET m.seq = row.seq, m.role = row.role, "
            "m.payload = row.payload, m.size = row.size, "
            "m.size_counter = row.size_counter) "
            "WITH c "
            "OPTIONAL MATCH (d:{M}) USING INDEX SEEK d:{M}(conversation_id, id) "
            "WHERE d.conversation_id = $cid AND d.id IN $delete_ids "
            "DETACH DELETE d"
        )
        # A replace's writes in one statement: the messages not kept go, the
        # new list is upserted with sequence 0..n-1, the counters are reset
        # and the record of evicted ids is cleared (the list is the whole
        # conversation now).
        self.replace = text(
            counters + " REMOVE c.evicted_ids, c.emptied WITH c "
            "OPTIONAL MATCH (old:{M}) USING INDEX SEEK old:{M}(conversation_id, seq) "
            "WHERE old.conversation_id = $cid AND old.seq >= 0 "
            "AND NOT old.id IN $keep "
            "DETACH DELETE old "
            "WITH c, count(old) AS deleted "
            "FOREACH (row IN $rows | "
            "MERGE (m:{M} {{conversation_id: $cid, id: row.id}}) "
            "SET m.seq = row.seq, m.role = row.role, m.payload = row.payload, "
            "m.size = row.size, m.size_counter = row.size_counter)"
        )
        self.delete_messages = text(
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 "
            "DETACH DELETE m"
        )
        self.delete_conversation = text("MATCH (c:{C} {{id: $cid}}) DETACH DELETE c")
        # One batch per statement, run until a batch comes back short: the
        # form that runs on every 5.x (CALL { WITH ... } IN TRANSACTIONS is
        # deprecated from 5.23 on, and CALL (m) { ... } is new there).
        self.purge = (
            text(
                "MATCH (m:{M}) WITH m LIMIT $batch DETACH DELETE m "
                "RETURN count(*) AS deleted"
            ),
            text(
                "MATCH (c:{C}) WITH c LIMIT $batch DETACH DELETE c "
                "RETURN count(*) AS deleted"
            ),
        )

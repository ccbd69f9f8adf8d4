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
                    version, evicted_ids, emptied,
                    owner, metadata, created_at, updated_at})
    (:Message {conversation_id, id, seq, batch, role, payload, size,
               size_counter, system_key})

``evicted_ids`` is the conversation's record of evicted message ids
(:mod:`chatledger.evicted_ids`): the ids its appends took out of the window,
oldest first, at most :data:`chatledger.adapters.EVICTED_IDS_KEPT` of them
(the list :func:`chatledger.adapters.kept_newest` makes, sliced on the server
so the record never travels to the client). An append reads which of its ids
are in it and extends it in its own statements. ``emptied`` marks a
conversation whose window left no message: its node stays for the record, but
it is not listed. ``owner``, ``metadata`` (JSON text), ``created_at`` and
``updated_at`` (epoch milliseconds) are the conversation's record
(:class:`chatledger.SupportsConversationInfo`); a conversation made by
``set_conversation_info`` before its first message is marked ``emptied``
too.

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
with the name of its measure; for the log (a conversation kept whole, its
window a view: :mod:`chatledger_neo4j.log_steps`), ``batch``, the sequence
number of the first message the same write stored (absent: 0), and, on system
messages, ``system_key``, the text rule 1 compares in the server. Messages
point to their conversation by ``conversation_id`` rather than by a
relationship: every read seeks a composite index on it, and appends do not add
relationships to one ever denser node.

The log's newest rows are read through the ``(conversation_id, seq)`` index
in its descending order, not by walking the graph (a chain of ``NEXT``
relationships from a ``LAST`` pointer on the conversation): a walk reads as
many nodes and relationships as it returns rows, the index seek stops at its
``LIMIT`` just the same (PROFILE: 28 rows read for a view of a 20-message
window, at 100 or 2,000 stored messages alike), and a chain would make every
append rewrite the pointer and lock the previous tail node too.

Schema (created by :attr:`Statements.schema`, each ``IF NOT EXISTS``;
``upgrade_schema`` creates those a store of an earlier release lacks):

- a uniqueness constraint on ``Conversation.id``, which makes concurrent
  ``MERGE`` of one conversation create one node;
- a uniqueness constraint on ``Message (conversation_id, id)``: the message id
  lookups that make a retried append a no-op seek its index;
- a range index on ``Message (conversation_id, seq)``: reading a conversation
  in order, a view's newest rows, a page of the log, and the oldest messages
  a window append evicts seek it;
- a range index on ``Message (conversation_id, role, seq)``: the current
  system set (the newest system row, then the system rows from its batch on)
  is two seeks on it, so system messages the log superseded are never read.
  Releases before the log made a ``(conversation_id, role)`` index instead;
  nothing reads it any more (``drop_schema`` drops it, and so may you:
  ``DROP INDEX chatledger_message_<label>_role``);
- range indexes on ``Conversation (owner, updated_at, id)`` and
  ``Conversation (updated_at, id)``: a listing of records is a range of one
  of them read newest first, an owner's reading that owner's entries only.
  A node enters an index once it has every property of it: a node without
  ``updated_at`` (written by an earlier release) is listed by neither.

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
    "INDEXES_FOUND",
    "LABEL_PATTERN",
    "LABEL_USED",
    "Statements",
    "quote_label",
    "validate_label",
]

#: Waits (up to five minutes) until the index named ``$name`` is online.
AWAIT_INDEX: LiteralString = "CALL db.awaitIndex($name, 300)"
#: The names among ``$names`` of indexes in the database (a uniqueness
#: constraint is backed by an index of its name).
INDEXES_FOUND: LiteralString = (
    "SHOW INDEXES YIELD name WHERE name IN $names RETURN name"
)
#: ``$label`` when a node has it: unlike a ``MATCH`` on a label no node has,
#: this draws no warning from the server.
LABEL_USED: LiteralString = (
    "CALL db.labels() YIELD label WHERE label = $label RETURN label"
)
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


#: The time of a write, in epoch milliseconds: the transaction's, so every
#: statement of one transaction writes the same time.
NOW = "datetime.transaction().epochMillis"


def moved(unchanged: str) -> str:
    """The new ``c.updated_at`` of a write: its time, unless ``unchanged``.

    Never earlier than it was: a writer whose transaction began before the
    previous writer committed waits for the lock with an older time, and a
    conversation moving back would let a listing show it twice.
    """
    return (
        f"CASE WHEN {unchanged} OR c.updated_at >= {NOW} "
        f"THEN c.updated_at ELSE {NOW} END"
    )


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
            "message_system": f"chatledger_message_{message}_system",
            "conversation_owner": f"chatledger_conversation_{conversation}_owner",
            "conversation_updated": f"chatledger_conversation_{conversation}_updated",
        }
        # Made by releases before the log: nothing reads it any more, and
        # drop_schema drops it with the rest.
        retired_role = f"`chatledger_message_{message}_role`"
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
                "CREATE INDEX {message_system} IF NOT EXISTS "
                "FOR (m:{M}) ON (m.conversation_id, m.role, m.seq)"
            ),
            text(
                "CREATE INDEX {conversation_owner} IF NOT EXISTS "
                "FOR (c:{C}) ON (c.owner, c.updated_at, c.id)"
            ),
            text(
                "CREATE INDEX {conversation_updated} IF NOT EXISTS "
                "FOR (c:{C}) ON (c.updated_at, c.id)"
            ),
        )
        self.drop_schema = (
            text("DROP CONSTRAINT {conversation_id} IF EXISTS"),
            text("DROP CONSTRAINT {message_id} IF EXISTS"),
            text("DROP INDEX {message_seq} IF EXISTS"),
            text("DROP INDEX {message_system} IF EXISTS"),
            text("DROP INDEX {conversation_owner} IF EXISTS"),
            text("DROP INDEX {conversation_updated} IF EXISTS"),
            _text("DROP INDEX {role} IF EXISTS", role=retired_role),
        )
        # Writing a property takes the node's write lock; every write does
        # this first, so sequence and counters are read only while it is held.
        # The value is new for every write, even across a delete and
        # re-create, so a reader that sees the same version before and after
        # the messages knows no write committed in between.
        # A node made here is the conversation's record too: created_at and
        # updated_at are the transaction's time, in epoch milliseconds.
        lock = (
            "MERGE (c:{C} {{id: $cid}}) "
            "ON CREATE SET c.next_seq = 0, c.message_count = 0, "
            "c.created_at = " + NOW + ", c.updated_at = " + NOW + " "
            "SET c.version = randomUUID() "
        )
        self.lock = text(lock)
        self.lock_existing = text(
            "MATCH (c:{C} {{id: $cid}}) "
            "SET c.version = randomUUID() "
            "RETURN count(c) AS found"
        )
        # The system messages a view shows (rule 1): those of the latest
        # append that stored any. The newest system row names that append's
        # batch (none recorded: 0, as save_all and releases before the log
        # wrote them), and the set is the system rows from that sequence on.
        # Both are seeks on (conversation_id, role, seq), so superseded system
        # messages the log keeps are never read.
        current_system = (
            "MATCH (l:{M}) USING INDEX SEEK l:{M}(conversation_id, role, seq) "
            "WHERE l.conversation_id = $cid AND l.role = $system AND l.seq >= 0 "
            "WITH l ORDER BY l.conversation_id DESC, l.role DESC, l.seq DESC "
            "LIMIT 1 "
            "MATCH (s:{M}) USING INDEX SEEK s:{M}(conversation_id, role, seq) "
            "WHERE s.conversation_id = $cid AND s.role = $system "
            "AND s.seq >= coalesce(l.batch, 0) "
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
            "COLLECT {{ " + current_system + "RETURN s.payload "
            "ORDER BY s.conversation_id, s.role, s.seq }} AS system, "
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
        # of evicted ids, and is not listed. The listings take the property's
        # name as $emptied (steps.EMPTIED): on a database where no window
        # ever emptied a conversation the name is unknown, and the server
        # warns about a literal c.emptied with every listing (the driver logs
        # the warning on stderr); a name given as a parameter is not checked.
        self.list_ids = text(
            "MATCH (c:{C}) WHERE c[$emptied] IS NULL RETURN c.id AS id"
        )
        #: Pages of conversation ids in id order, on the uniqueness index.
        self.first_ids_page = text(
            "MATCH (c:{C}) WHERE c.id IS NOT NULL AND c[$emptied] IS NULL "
            "RETURN c.id AS id ORDER BY id LIMIT $limit"
        )
        self.ids_page_after = text(
            "MATCH (c:{C}) WHERE c.id > $after AND c[$emptied] IS NULL "
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
            "c.updated_at = " + moved("NOT $moved") + ", "
            "c.evicted_ids = CASE WHEN size($evicted) = 0 THEN c.evicted_ids "
            "ELSE (coalesce(c.evicted_ids, []) + $evicted)[-$evicted_kept..] END "
            "FOREACH (row IN $rows | "
            "MERGE (m:{M} {{conversation_id: $cid, id: row.id}}) "
            "ON CREATE SET m.seq = row.seq, m.batch = row.batch, m.role = row.role, "
            "m.payload = row.payload, m.size = row.size, "
            "m.size_counter = row.size_counter, m.system_key = row.system_key) "
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
            counters + ", c.updated_at = " + moved("false") + " "
            "REMOVE c.evicted_ids, c.emptied WITH c "
            "OPTIONAL MATCH (old:{M}) USING INDEX SEEK old:{M}(conversation_id, seq) "
            "WHERE old.conversation_id = $cid AND old.seq >= 0 "
            "AND NOT old.id IN $keep "
            "DETACH DELETE old "
            "WITH c, count(old) AS deleted "
            "FOREACH (row IN $rows | "
            "MERGE (m:{M} {{conversation_id: $cid, id: row.id}}) "
            "SET m.seq = row.seq, m.batch = row.batch, m.role = row.role, "
            "m.payload = row.payload, m.size = row.size, "
            "m.size_counter = row.size_counter, m.system_key = row.system_key)"
        )
        # -- the log ---------------------------------------------------------
        # A log append in one statement. After the lock: the ids held (stored,
        # or in the record of evicted ids) are left out; when what is left
        # holds a system message, the current system set is read and rule 1
        # (merge_system) runs on system_key texts: a fresh system message
        # equal to one shown, or to an earlier one of the batch, is left out,
        # and any other supersedes the set (which stays in the log). The rest
        # is created with the next sequence numbers, its batch the first of
        # them. A shown system row without a stored key (written before the
        # log) takes it from $keys; while one has neither, nothing is written
        # and its payload comes back as unkeyed, for the client to compute.
        self.log_append = text(
            # The aggregation keeps the planner from reading the node's
            # properties before the lock (it moves a property read down to
            # the seek when it estimates that cheaper): they would be stale.
            lock + "WITH c, count(*) AS locked "
            "WITH c, coalesce(c.evicted_ids, []) + COLLECT {{ "
            "MATCH (k:{M}) USING INDEX SEEK k:{M}(conversation_id, id) "
            "WHERE k.conversation_id = $cid AND k.id IN $ids RETURN k.id }} AS held "
            "WITH c, [r IN $rows WHERE NOT r.id IN held] AS fresh "
            "WITH c, fresh, COLLECT {{ " + current_system + "RETURN s }} AS shown "
            "WITH c, fresh, shown, "
            "[s IN shown | coalesce(s.system_key, $keys[s.id])] AS shown_keys, "
            # Keys are compared only when a fresh message is a system one.
            "[s IN shown WHERE any(r IN fresh WHERE r.role = $system) "
            "AND s.system_key IS NULL AND $keys[s.id] IS NULL "
            "| [s.id, s.payload]] AS unkeyed "
            "WITH c, fresh, shown, shown_keys, unkeyed, "
            "any(r IN fresh WHERE r.role = $system AND NOT r.key IN shown_keys) "
            "AS supersedes "
            "WITH c, shown, unkeyed, c.next_seq AS base, "
            "CASE WHEN size(unkeyed) > 0 THEN [] ELSE reduce("
            "merged = {{seen: CASE WHEN supersedes THEN [] ELSE shown_keys END, "
            "kept: []}}, r IN fresh | "
            "CASE WHEN r.role <> $system "
            "THEN {{seen: merged.seen, kept: merged.kept + [r]}} "
            "WHEN r.key IN merged.seen THEN merged "
            "ELSE {{seen: merged.seen + [r.key], kept: merged.kept + [r]}} END"
            ").kept END AS kept "
            "FOREACH (s IN [s IN shown WHERE s.system_key IS NULL] | "
            "SET s.system_key = $keys[s.id]) "
            "FOREACH (i IN range(0, size(kept) - 1) | "
            "CREATE (:{M} {{conversation_id: $cid, id: kept[i].id, seq: base + i, "
            "batch: base, role: kept[i].role, payload: kept[i].payload, "
            "size: kept[i].size, size_counter: kept[i].size_counter, "
            "system_key: kept[i].key}})) "
            "SET c.next_seq = base + size(kept), "
            "c.message_count = coalesce(c.message_count, 0) "
            "+ size([r IN kept WHERE r.role <> $system]), "
            # The window append's total stays right only when these sizes are
            # in its measure; otherwise it measures again (kept_total: None).
            "c.size_total = CASE WHEN size(kept) = 0 THEN c.size_total "
            "WHEN c.size_counter = $counter THEN c.size_total + reduce("
            "t = 0, r IN kept | t + CASE WHEN r.role = $system THEN 0 "
            "ELSE r.size END) END, "
            "c.emptied = CASE WHEN size(kept) = 0 THEN c.emptied END, "
            "c.updated_at = " + moved("size(kept) = 0") + " "
            "RETURN [r IN kept | r.id] AS appended, base AS first, unkeyed"
        )
        # The newest non-system rows below $below, newest first, as
        # [seq, payload, size under $counter or null]: the seek runs in the
        # index's descending order and stops at the LIMIT.
        tail = (
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 AND m.seq < $below "
            "AND m.role <> $system "
            "WITH m ORDER BY m.conversation_id DESC, m.seq DESC LIMIT $limit "
            "RETURN [m.seq, m.payload, "
            "CASE WHEN m.size_counter = $counter THEN m.size END]"
        )
        # A window view's first read, in one statement: the current system
        # set, as [seq, batch, payload, size], and the newest rows, between
        # two reads of the conversation's version (as read_snapshot).
        self.view = text(
            "OPTIONAL MATCH (c:{C} {{id: $cid}}) "
            "WITH collect(c.version) AS before "
            "WITH before, COLLECT {{ " + current_system + "RETURN [s.seq, "
            "coalesce(s.batch, 0), s.payload, "
            "CASE WHEN s.size_counter = $counter THEN s.size END] "
            "ORDER BY s.conversation_id, s.role, s.seq }} AS system, "
            "COLLECT {{ " + tail + " }} AS tail "
            "OPTIONAL MATCH (c:{C} {{id: $cid}}) "
            "RETURN before, system, tail, collect(c.version) AS after"
        )
        # A further read of a view: the rows below the oldest one read so
        # far, only while that row ($anchor at $below) is still stored; after
        # a window append evicted it or save_all renumbered the conversation,
        # nothing.
        self.view_older = text(
            "OPTIONAL MATCH (c:{C} {{id: $cid}}) "
            "WITH collect(c.version) AS before "
            "WITH before, COLLECT {{ "
            "MATCH (a:{M}) USING INDEX SEEK a:{M}(conversation_id, id) "
            "WHERE a.conversation_id = $cid AND a.id = $anchor AND a.seq = $below "
            + tail
            + " }} AS tail "
            "OPTIONAL MATCH (c:{C} {{id: $cid}}) "
            "RETURN before, [] AS system, tail, collect(c.version) AS after"
        )
        # One page of the log, one row more than asked: newest first below
        # $below, or oldest first above $after; [seq, payload] each.
        self.page_newest = text(
            "RETURN COLLECT {{ "
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 AND m.seq < $below "
            "WITH m ORDER BY m.conversation_id DESC, m.seq DESC LIMIT $limit "
            "RETURN [m.seq, m.payload] }} AS rows"
        )
        self.page_oldest = text(
            "RETURN COLLECT {{ "
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq > $after "
            "WITH m ORDER BY m.conversation_id, m.seq LIMIT $limit "
            "RETURN [m.seq, m.payload] }} AS rows"
        )
        # -- the trim of a bounded log (chatledger.retention) ---------------
        # Its first statement, in a transaction of its own after the append:
        # the lock, then whether the append's last message ($anchor at $last)
        # is still stored (not after a save_all renumbered the conversation
        # or a delete), and the first user message from $first_kept on, a
        # seek of (conversation_id, role, seq). Core's Retention.cutoff takes
        # it from there, with the view of the append's window, read in the
        # same transaction.
        self.trim_start = text(
            "OPTIONAL MATCH (c:{C} {{id: $cid}}) "
            "SET c.version = randomUUID() "
            "WITH c, count(*) AS locked "
            "RETURN c IS NOT NULL AND COLLECT {{ "
            "MATCH (a:{M}) USING INDEX SEEK a:{M}(conversation_id, id) "
            "WHERE a.conversation_id = $cid AND a.id = $anchor AND a.seq = $last "
            "RETURN a.id }} <> [] AS anchored, "
            "COLLECT {{ "
            "MATCH (u:{M}) USING INDEX SEEK u:{M}(conversation_id, role, seq) "
            "WHERE u.conversation_id = $cid AND u.role = $user "
            "AND u.seq >= $first_kept "
            "WITH u ORDER BY u.conversation_id, u.role, u.seq LIMIT 1 "
            "RETURN u.seq }} AS user_from"
        )
        # The trim itself: every message below $cutoff goes but the current
        # system set (rule 1, as a view shows it: current_system); their ids,
        # oldest first, join the record of evicted ids as the window append's
        # evictions do (its newest $evicted_kept, chatledger's kept_newest),
        # and the counters follow: message_count counts the non-system ones,
        # size_total stays right only when each size removed is in its
        # measure (otherwise null: the window append measures again).
        self.trim = text(
            "MATCH (c:{C} {{id: $cid}}) "
            "WITH c, COLLECT {{ " + current_system + "RETURN s.id }} AS shown "
            "WITH c, COLLECT {{ "
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 AND m.seq < $cutoff "
            "AND NOT m.id IN shown "
            "WITH m ORDER BY m.conversation_id, m.seq RETURN m }} AS gone "
            "WITH c, gone, [m IN gone | m.id] AS ids, "
            "[m IN gone WHERE m.role <> $system] AS others "
            "SET c.evicted_ids = CASE WHEN size(ids) = 0 THEN c.evicted_ids "
            "ELSE (coalesce(c.evicted_ids, []) + ids)[-$evicted_kept..] END, "
            "c.message_count = coalesce(c.message_count, 0) - size(others), "
            "c.size_total = CASE WHEN size(others) = 0 THEN c.size_total "
            "WHEN all(m IN others WHERE m.size IS NOT NULL "
            "AND m.size_counter = c.size_counter) "
            "THEN c.size_total - reduce(t = 0, m IN others | t + m.size) END "
            "FOREACH (m IN gone | DETACH DELETE m) "
            "RETURN ids AS trimmed"
        )
        # -- removals on request (chatledger.SupportsLogRemoval) ------------
        # One statement each, the whole of a managed transaction: the lock
        # (a missing conversation answers no row), then the messages taken,
        # oldest first: the newest $count by sequence, or those of $ids. The
        # counters lose them as a trim's do; a conversation left without a
        # message is marked emptied (not listed: its node keeps next_seq and
        # the record of evicted ids, which removed ids do not join). Rule 1
        # needs no write: the current system set is found from the newest
        # system message left and its batch (current_system), so taking the
        # set shows the one it superseded again.
        newest = (
            "reverse(COLLECT {{ "
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 "
            "WITH m ORDER BY m.conversation_id DESC, m.seq DESC LIMIT $count "
            "RETURN m }})"
        )
        named = (
            "COLLECT {{ "
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, id) "
            "WHERE m.conversation_id = $cid AND m.id IN $ids "
            "WITH m ORDER BY m.seq RETURN m }}"
        )
        removal = (
            "WITH c, gone, [m IN gone WHERE m.role <> $system] AS others, "
            # Whether a message is left: the newest one not taken, read
            # newest first, so past as many rows as are taken at most.
            "COLLECT {{ "
            "MATCH (k:{M}) USING INDEX SEEK k:{M}(conversation_id, seq) "
            "WHERE k.conversation_id = $cid AND k.seq >= 0 AND NOT k IN gone "
            "WITH k ORDER BY k.conversation_id DESC, k.seq DESC LIMIT 1 "
            "RETURN k.seq }} <> [] AS left "
            "SET c.message_count = coalesce(c.message_count, 0) - size(others), "
            "c.size_total = CASE WHEN size(others) = 0 THEN c.size_total "
            "WHEN all(m IN others WHERE m.size IS NOT NULL "
            "AND m.size_counter = c.size_counter) "
            "THEN c.size_total - reduce(t = 0, m IN others | t + m.size) END, "
            "c.emptied = CASE WHEN size(gone) = 0 OR left THEN c.emptied "
            "ELSE true END, "
            "c.updated_at = " + moved("size(gone) = 0") + " "
            "WITH gone, [m IN gone | m.payload] AS removed "
            "FOREACH (m IN gone | DETACH DELETE m) "
            "RETURN removed"
        )
        locked = (
            "MATCH (c:{C} {{id: $cid}}) "
            "SET c.version = randomUUID() "
            "WITH c, count(*) AS locked "
        )
        self.remove_newest = text(locked + "WITH c, " + newest + " AS gone " + removal)
        self.remove_named = text(locked + "WITH c, " + named + " AS gone " + removal)
        self.delete_messages = text(
            "MATCH (m:{M}) USING INDEX SEEK m:{M}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 "
            "DETACH DELETE m"
        )
        self.delete_conversation = text("MATCH (c:{C} {{id: $cid}}) DETACH DELETE c")
        # -- conversation records (chatledger.SupportsConversationInfo) -----
        # A record is the conversation node's own properties: owner, metadata
        # (compact JSON text; absent for {}), created_at and updated_at
        # (epoch ms). The count is the node's message_count, which counts
        # the non-system messages, plus the system ones counted on the
        # (conversation_id, role, seq) index. A node an earlier release wrote
        # has no times: its oldest and newest message's payloads come back,
        # for the client to read their created_at (steps.record_info). The
        # properties no index names are read by the names in $keys
        # (steps.RECORD_KEYS): a database that never stored one would have
        # the server warn about a literal name with every read, as with
        # $emptied.
        record = (
            "c.id AS id, c[$keys.created_at] AS created_at, "
            "c.updated_at AS updated_at, "
            "coalesce(c[$keys.message_count], 0) + COUNT {{ "
            "MATCH (s:{M}) USING INDEX SEEK s:{M}(conversation_id, role, seq) "
            "WHERE s.conversation_id = c.id AND s.role = $system AND s.seq >= 0 "
            "}} AS message_count, c.owner AS owner, "
            "c[$keys.metadata] AS metadata, "
            "CASE WHEN c[$keys.created_at] IS NULL THEN COLLECT {{ "
            "MATCH (o:{M}) USING INDEX SEEK o:{M}(conversation_id, seq) "
            "WHERE o.conversation_id = c.id AND o.seq >= 0 "
            "WITH o ORDER BY o.conversation_id, o.seq LIMIT 1 "
            "RETURN o.payload }} END AS oldest, "
            "CASE WHEN c.updated_at IS NULL THEN COLLECT {{ "
            "MATCH (n:{M}) USING INDEX SEEK n:{M}(conversation_id, seq) "
            "WHERE n.conversation_id = c.id AND n.seq >= 0 "
            "WITH n ORDER BY n.conversation_id DESC, n.seq DESC LIMIT 1 "
            "RETURN n.payload }} END AS newest"
        )
        # Owner and metadata in one statement, which locks the node (making
        # it, as a record without messages: emptied, so not listed by id)
        # and reads the record back. updated_at stays.
        self.set_info = text(
            "MERGE (c:{C} {{id: $cid}}) "
            "ON CREATE SET c.next_seq = 0, c.message_count = 0, "
            "c.created_at = " + NOW + ", c.updated_at = " + NOW + ", "
            "c.emptied = true "
            "SET c.owner = CASE WHEN $set_owner THEN $owner ELSE c.owner END, "
            "c.metadata = CASE WHEN $set_metadata THEN $metadata "
            "ELSE c[$keys.metadata] END "
            "WITH c, count(*) AS locked RETURN " + record
        )
        self.get_info = text("MATCH (c:{C} {{id: $cid}}) RETURN " + record)
        # One batch of the listing: newest updated_at first, ties by id
        # descending, strictly below the bound ($top, $after_id) (a null
        # $after_id takes every id at $top). The seek is a range of one
        # index read in its own order, so LIMIT stops it: an owner's
        # listing reads that owner's entries only.
        below = (
            "AND c.id IS NOT NULL "
            "AND (c.updated_at < $top OR $after_id IS NULL OR c.id < $after_id) "
        )
        self.list_owned = text(
            "MATCH (c:{C}) USING INDEX SEEK c:{C}(owner, updated_at, id) "
            "WHERE c.owner = $owner AND c.updated_at <= $top " + below + "WITH c "
            "ORDER BY c.owner DESC, c.updated_at DESC, c.id DESC LIMIT $limit "
            "RETURN " + record
        )
        self.list_all = text(
            "MATCH (c:{C}) USING INDEX SEEK c:{C}(updated_at, id) "
            "WHERE c.updated_at <= $top " + below + "WITH c "
            "ORDER BY c.updated_at DESC, c.id DESC LIMIT $limit "
            "RETURN " + record
        )
        # Nodes an earlier release wrote, a batch at a time (a scan of the
        # label, for upgrade_schema), and the times the client read from
        # their messages, filled where still missing.
        self.times_missing = text(
            "MATCH (c:{C}) WHERE c.id IS NOT NULL "
            "AND (c[$keys.created_at] IS NULL OR c.updated_at IS NULL) "
            "WITH c LIMIT $batch RETURN " + record
        )
        self.fill_times = text(
            "UNWIND $rows AS row MATCH (c:{C} {{id: row.id}}) "
            "SET c.created_at = coalesce(c.created_at, row.created_at), "
            "c.updated_at = coalesce(c.updated_at, row.updated_at) "
            "RETURN count(c) AS filled"
        )
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

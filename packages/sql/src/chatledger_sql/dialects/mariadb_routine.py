"""MariaDB: a window append in one round trip, through a stored procedure.

Example (needs a MariaDB server; the repository creates and calls it):
    from chatledger import Message, MessageWindow
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url("mariadb://app@localhost/chat")
    window = MessageWindow(20)
    repository.append_to_window("c1", [Message.user("hi")], window)  # one CALL

The same append as PostgreSQL's function
(:mod:`chatledger_sql.dialects.postgresql_routine`; what every routine takes
and declines is in :mod:`chatledger_sql.dialects.append_routine`), written in
MariaDB's SQL: the procedure begins and commits its own transaction, locks
the conversation row with the upsert the portable append uses, counts the
evictions with a translation of :func:`chatledger.window.count_evictions`,
and answers one row, ``outcome`` and the evicted ids as a JSON array. A
MariaDB cursor holds its whole result once opened, so the oldest rows are
read in chunks, as the portable append reads them: first as many as the
excess needs, then twice as many each time. JSON_TABLE (MariaDB 10.6 and
later) reads the batch.

The array of evicted ids is one string: JSON_ARRAYAGG stops at the session's
``group_concat_max_len``, which the procedure lifts for its own statements
and sets back to the caller's value before it answers or fails, and no
string is longer than ``max_allowed_packet``, so an append whose evicted ids
would not fit one is declined, for the portable append to write.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.dialects.mysql.base import MySQLDialect as SAMySQLDialect

from chatledger.adapters import (
    EVICTED_IDS_KEPT,
    EVICTED_IDS_TRIM_STEP,
    TOKEN_WINDOW_FIRST_READ,
    TURN_SLACK,
)
from chatledger_sql.dialects.append_routine import AppendRoutine

__all__ = ["MariaDBAppendRoutine"]

_MARIADB = SAMySQLDialect(is_mariadb=True)  # type: ignore[no-untyped-call]

#: Bytes kept free beside the evicted ids in the answer's packet: the
#: array's brackets, the outcome and the row's framing.
_ANSWER_MARGIN = 1024

# {m}, {c}, {e}: the tables; {id}: the id columns' type; {batch_*}: the
# batch's columns for JSON_TABLE. Comments name the Python each part
# translates.
_BODY = """
BEGIN
  DECLARE v_next BIGINT;
  DECLARE v_system_count, v_other_count INT;
  DECLARE v_counter {id};
  DECLARE v_system_weight, v_other_weight BIGINT;
  DECLARE v_expires DATETIME(6);
  DECLARE v_n, v_systems, v_known INT DEFAULT 0;
  DECLARE v_counted BOOLEAN DEFAULT p_counter IS NULL;
  DECLARE v_system_size, v_stored, v_total, v_excess BIGINT;
  DECLARE v_cut, v_index, v_read, v_got INT DEFAULT 0;
  DECLARE v_dropped BIGINT DEFAULT 0;
  DECLARE v_last_user INT DEFAULT NULL;
  DECLARE v_leading INT DEFAULT 0;
  DECLARE v_found, v_end, v_open, v_stored_done, v_expired BOOLEAN DEFAULT FALSE;
  DECLARE v_chunk INT;
  DECLARE v_after BIGINT DEFAULT -1;
  DECLARE v_seq BIGINT;
  DECLARE v_role VARCHAR(16);
  DECLARE v_size BIGINT;
  DECLARE v_evict, v_drop_new INT DEFAULT 0;
  DECLARE v_upto, v_first, v_last, v_bound BIGINT DEFAULT -1;
  DECLARE v_evicted_size, v_kept_size, v_new_size BIGINT DEFAULT 0;
  DECLARE v_outcome VARCHAR(16) DEFAULT 'declined';
  DECLARE v_evicted LONGTEXT DEFAULT '[]';
  DECLARE v_dropped_ids LONGTEXT;
  DECLARE v_answer BIGINT DEFAULT 0;
  DECLARE v_cap BIGINT UNSIGNED DEFAULT @@SESSION.group_concat_max_len;
  DECLARE c_oldest CURSOR (p_after BIGINT, p_rows INT) FOR
    SELECT seq, role, IF(v_counted, 1, weight) FROM {m}
      WHERE conversation_id = p_cid AND role <> 'system' AND seq > p_after
      ORDER BY seq LIMIT p_rows;
  DECLARE c_new CURSOR FOR
    SELECT k.role, k.size FROM JSON_TABLE(p_batch, '$[*]' COLUMNS ({batch_roles}))
      AS k ORDER BY k.n;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = TRUE;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    SET SESSION group_concat_max_len = v_cap;
    RESIGNAL;
  END;

  -- JSON_ARRAYAGG stops at group_concat_max_len (1 MiB unless set): lifted
  -- for this call, the caller's value given back before the answer.
  SET SESSION group_concat_max_len = 4294967295;
  work: BEGIN
    SELECT count(*), coalesce(sum(k.role = 'system'), 0), coalesce(sum(k.size), 0)
      INTO v_n, v_systems, v_new_size
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS ({batch_roles})) AS k;
    IF v_n = 0 OR v_systems > 0 THEN
      LEAVE work;
    END IF;
    START TRANSACTION;
    -- The lock (dialect.lock_conversation): create the row or lock it.
    INSERT INTO {c} (conversation_id, next_seq, version, system_count,
        other_count, weight_counter, system_weight, other_weight, updated_at,
        expires_at, created_at)
      VALUES (p_cid, 0, 0, 0, 0, NULL, 0, 0, p_now, NULL, p_now)
      ON DUPLICATE KEY UPDATE version = version + 1;
    SELECT next_seq, system_count, other_count, weight_counter, system_weight,
        other_weight, expires_at
      INTO v_next, v_system_count, v_other_count, v_counter, v_system_weight,
        v_other_weight, v_expires
      FROM {c} WHERE conversation_id = p_cid;
    -- An expired conversation is forgotten (write_steps.forgotten), judged by
    -- the client's clock as of now, after the lock wait.
    IF v_expires IS NOT NULL AND v_expires <= p_now
        + INTERVAL timestampdiff(MICROSECOND, now(6), sysdate(6)) MICROSECOND THEN
      DELETE FROM {m} WHERE conversation_id = p_cid;
      DELETE FROM {e} WHERE conversation_id = p_cid;
      SET v_system_count = 0, v_other_count = 0, v_expired = TRUE;
    END IF;
    IF v_system_count + v_other_count > 0 AND NOT v_counted
        AND NOT v_counter <=> p_counter THEN
      ROLLBACK;
      LEAVE work;
    END IF;
    -- Stored or evicted ids: all of them make the append a no-op (a retry),
    -- some of them leave it to the portable path.
    -- Joins from the batch: one unique-key lookup per id in each table (as
    -- an EXISTS, the record's part is materialized whole).
    SELECT count(*) INTO v_known
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (id {id} PATH '$.id')) AS k
      LEFT JOIN {m} AS sm ON sm.conversation_id = p_cid AND sm.message_id = k.id
      LEFT JOIN {e} AS se ON se.conversation_id = p_cid AND se.message_id = k.id
      WHERE sm.seq IS NOT NULL OR se.seq IS NOT NULL;
    IF v_known > 0 THEN
      ROLLBACK;
      IF v_known = v_n THEN
        SET v_outcome = 'known';
      END IF;
      LEAVE work;
    END IF;
    -- write_steps.stored_window: sizes from the row.
    IF v_counted THEN
      SET v_system_size = v_system_count, v_total = v_other_count;
    ELSEIF v_system_count + v_other_count = 0 THEN
      SET v_system_size = 0, v_total = 0;
    ELSE
      SET v_system_size = coalesce(v_system_weight, 0),
          v_total = coalesce(v_other_weight, 0);
    END IF;
    SET v_stored = v_total, v_total = v_total + v_new_size;
    SET v_excess = v_system_size + v_total - p_limit;
    -- append_plan._first_read: the first chunk of the oldest rows.
    SET v_chunk = IF(v_excess <= 0, 1,
                     IF(v_counted, v_excess + {slack}, {token_read}));
    -- window.count_evictions over the stored non-system rows, oldest first,
    -- then the new ones, read only as far as the answer needs.
    scan: LOOP
      IF NOT v_stored_done THEN
        IF NOT v_open THEN
          OPEN c_oldest(v_after, v_chunk);
          SET v_open = TRUE, v_got = 0;
        END IF;
        SET v_end = FALSE;
        FETCH c_oldest INTO v_seq, v_role, v_size;
        IF v_end THEN
          CLOSE c_oldest;
          SET v_open = FALSE;
          IF v_got < v_chunk THEN
            SET v_stored_done = TRUE;
            OPEN c_new;
          ELSE
            SET v_chunk = v_chunk * 2;
            ITERATE scan;
          END IF;
        ELSE
          SET v_got = v_got + 1, v_after = v_seq, v_read = v_read + 1;
        END IF;
      END IF;
      IF v_stored_done THEN
        SET v_end = FALSE;
        FETCH c_new INTO v_role, v_size;
        IF v_end THEN
          LEAVE scan;
        END IF;
      END IF;
      IF v_role = 'tool' AND v_leading = v_index THEN
        SET v_leading = v_leading + 1;
      END IF;
      IF v_excess <= 0 THEN
        -- Rule 4 alone: only leading tool messages go.
        IF v_role <> 'tool' THEN
          LEAVE scan;
        END IF;
        SET v_cut = v_cut + 1;
      ELSEIF v_dropped >= v_excess THEN
        IF v_role = 'user' THEN
          SET v_cut = v_index, v_found = TRUE;
          LEAVE scan;
        END IF;
      ELSE
        IF v_role = 'user' THEN
          SET v_last_user = v_index;
        END IF;
        SET v_dropped = v_dropped + v_size;
      END IF;
      SET v_index = v_index + 1;
    END LOOP;
    IF v_open THEN
      CLOSE c_oldest;
    END IF;
    IF v_stored_done THEN
      CLOSE c_new;
    END IF;
    IF v_excess > 0 AND NOT v_found THEN
      -- No user message follows the cut: the newest turn stays whole; with
      -- no user message at all, the history less its leading tool messages.
      SET v_cut = coalesce(v_last_user, v_leading);
    END IF;
    -- append_plan.plan_append: the cut's stored rows go, then new ones.
    SET v_evict = least(v_cut, v_read);
    SET v_drop_new = v_cut - v_evict;
    -- The answer's length: each id quoted, and a separator.
    IF v_evict > 0 THEN
      SELECT max(o.seq), min(o.seq), sum(o.size), sum(o.quoted + 2)
        INTO v_upto, v_first, v_evicted_size, v_answer
        FROM (SELECT seq, IF(v_counted, 1, weight) AS size,
                  octet_length(json_quote(message_id)) AS quoted FROM {m}
              WHERE conversation_id = p_cid AND role <> 'system'
              ORDER BY seq LIMIT v_evict) AS o;
      SET v_last = v_upto;
    END IF;
    IF v_drop_new > 0 THEN
      SELECT v_answer + sum(octet_length(json_quote(k.id)) + 2) INTO v_answer
        FROM JSON_TABLE(p_batch, '$[*]' COLUMNS ({batch_ids})) AS k
        WHERE k.n <= v_drop_new;
    END IF;
    -- A string, the array of evicted ids with it, is at most max_allowed_packet
    -- long: an answer that would not fit is left to the portable append.
    IF v_answer + {answer_margin} > @@max_allowed_packet THEN
      ROLLBACK;
      LEAVE work;
    END IF;
    IF v_evict > 0 THEN
      SELECT json_arrayagg(o.message_id ORDER BY o.seq) INTO v_evicted
        FROM (SELECT seq, message_id FROM {m}
              WHERE conversation_id = p_cid AND role <> 'system'
              ORDER BY seq LIMIT v_evict) AS o;
    END IF;
    IF v_drop_new > 0 THEN
      -- write_steps.append_writes: new messages dropped at once are numbered
      -- after the inserted rows.
      SELECT json_arrayagg(k.id ORDER BY k.n) INTO v_dropped_ids
        FROM JSON_TABLE(p_batch, '$[*]' COLUMNS ({batch_ids})) AS k
        WHERE k.n <= v_drop_new;
      SET v_evicted = json_merge_preserve(v_evicted, v_dropped_ids);
      IF v_evict = 0 THEN
        SET v_first = v_next + v_n - v_drop_new;
      END IF;
      SET v_last = v_next + v_n - 1;
    END IF;
    IF v_cut > 0 THEN
      -- evicted_ids.trim_due and trim_below.
      SET v_bound = v_last - {kept};
      IF v_bound >= 0 AND v_first <= v_last
          AND (v_first DIV {step} <> v_last DIV {step} OR v_first MOD {step} = 0)
      THEN
        DELETE FROM {e} WHERE conversation_id = p_cid AND seq <= v_bound;
      END IF;
      IF v_evict > 0 THEN
        INSERT INTO {e} (conversation_id, message_id, seq)
          SELECT p_cid, message_id, seq FROM {m}
            WHERE conversation_id = p_cid AND role <> 'system' AND seq <= v_upto
              AND seq > v_bound;
      END IF;
      IF v_drop_new > 0 THEN
        INSERT INTO {e} (conversation_id, message_id, seq)
          SELECT p_cid, k.id, v_next + v_n - v_drop_new + k.n - 1
            FROM JSON_TABLE(p_batch, '$[*]' COLUMNS ({batch_ids})) AS k
            WHERE k.n <= v_drop_new
              AND v_next + v_n - v_drop_new + k.n - 1 > v_bound;
      END IF;
    END IF;
    IF v_evict > 0 THEN
      DELETE FROM {m} WHERE conversation_id = p_cid AND role <> 'system'
        AND seq <= v_upto;
    END IF;
    INSERT INTO {m} (conversation_id, seq, message_id, role, content, payload,
        weight, created_at)
      SELECT p_cid, v_next + k.n - 1 - v_drop_new, k.id, k.role, k.content,
          k.payload, IF(v_counted, NULL, k.size), k.created
        FROM JSON_TABLE(p_batch, '$[*]' COLUMNS ({batch_rows})) AS k
        WHERE k.n > v_drop_new;
    SELECT coalesce(sum(k.size), 0) INTO v_kept_size
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS ({batch_roles})) AS k
      WHERE k.n > v_drop_new;
    -- An expired conversation starts a new record (no owner, no metadata).
    UPDATE {c} SET owner = IF(v_expired, NULL, owner),
        metadata = IF(v_expired, NULL, metadata),
        created_at = IF(v_expired, p_now, created_at),
        next_seq = v_next + v_n, version = version + 1,
        system_count = v_system_count,
        other_count = v_other_count - v_evict + (v_n - v_drop_new),
        weight_counter = p_counter,
        system_weight = IF(v_counted, NULL, v_system_size),
        other_weight = IF(v_counted, NULL, v_stored - v_evicted_size + v_kept_size),
        updated_at = p_now, expires_at = p_expires_at
      WHERE conversation_id = p_cid;
    COMMIT;
    SET v_outcome = 'appended';
  END work;
  SET SESSION group_concat_max_len = v_cap;
  SELECT v_outcome AS outcome, v_evicted AS evicted_ids;
END
"""


class MariaDBAppendRoutine(AppendRoutine):
    """MariaDB's: a stored procedure answering one row ``outcome, evicted_ids``.

    Args:
        tables: The repository's tables.
        timestamp: The timestamp column type, for binding ``now``.
        id_collation: The id columns' collation (``utf8mb4_nopad_bin``).
    """

    __slots__ = ("_id_collation",)

    sql_dialect = _MARIADB
    commits_itself = True

    def __init__(
        self, tables: Any, timestamp: Any = None, id_collation: str = "utf8mb4_bin"
    ) -> None:
        """Name the procedure and build its call."""
        self._id_collation = id_collation
        super().__init__(tables, timestamp)

    def call_sql(self) -> str:
        """``CALL name(...)``."""
        arguments = ":cid, :now, :expires_at, :limit, :counter, :batch"
        return f"CALL {self.qualified}({arguments})"

    def create_sql(self) -> str:
        """``CREATE PROCEDURE``."""
        id_type = f"VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {self._id_collation}"
        ids = f"n FOR ORDINALITY, id {id_type} PATH '$.id'"
        roles = (
            "n FOR ORDINALITY, role VARCHAR(16) PATH '$.role', "
            "size BIGINT PATH '$.size'"
        )
        body = _BODY.format(
            **self.table_names(),
            id=id_type,
            batch_ids=ids,
            batch_roles=roles,
            batch_rows=(
                f"{ids}, role VARCHAR(16) PATH '$.role', "
                "content LONGTEXT CHARACTER SET utf8mb4 PATH '$.content', "
                "payload LONGTEXT CHARACTER SET utf8mb4 PATH '$.payload', "
                "size BIGINT PATH '$.size', created DATETIME(6) PATH '$.created'"
            ),
            slack=TURN_SLACK,
            token_read=TOKEN_WINDOW_FIRST_READ,
            kept=EVICTED_IDS_KEPT,
            step=EVICTED_IDS_TRIM_STEP,
            answer_margin=_ANSWER_MARGIN,
        )
        return (
            f"CREATE PROCEDURE {self.qualified}(IN p_cid {id_type}, "
            "IN p_now DATETIME(6), IN p_expires_at DATETIME(6), IN p_limit BIGINT, "
            f"IN p_counter {id_type}, IN p_batch LONGTEXT) MODIFIES SQL DATA{body}"
        )

    def exists_sql_of(self, name: str) -> str:
        """The procedure's row in ``information_schema.ROUTINES``."""
        schema = self._tables.messages.schema
        where = "DATABASE()" if schema is None else f"'{schema}'"
        return (
            "SELECT max(ROUTINE_NAME) FROM information_schema.ROUTINES "
            f"WHERE ROUTINE_SCHEMA = {where} AND ROUTINE_TYPE = 'PROCEDURE' "
            f"AND ROUTINE_NAME = '{name}'"
        )

    def drop_sql_of(self, qualified: str) -> str:
        """``DROP PROCEDURE IF EXISTS``."""
        return f"DROP PROCEDURE IF EXISTS {qualified}"

    def created_text(self, moment: datetime) -> str:
        """UTC, as ``DATETIME(6)`` holds it."""
        return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")

    def evicted_list(self, value: Any) -> list[str]:
        """The JSON array the procedure answered."""
        found: list[str] = json.loads(value)
        return found

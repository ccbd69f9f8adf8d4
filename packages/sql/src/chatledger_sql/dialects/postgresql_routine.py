"""PostgreSQL's window append in one round trip: a PL/pgSQL function.

Example (needs a PostgreSQL server; the repository creates and calls it):
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url(
        "postgresql+psycopg://app@localhost/chat"
    )  # create_schema() also made the function chat_memory_append_v4

The routine of :mod:`chatledger_sql.dialects.append_routine` (which says what
it takes and what it declines), written in PL/pgSQL. It runs in the call's
own transaction: it creates or locks the conversation row with the upsert the
portable append uses, and counts the evictions reading the oldest rows
through a cursor only as far as the count needs.
"""

from __future__ import annotations

from sqlalchemy.dialects.postgresql.base import PGDialect

from chatledger.adapters import EVICTED_IDS_KEPT, EVICTED_IDS_TRIM_STEP
from chatledger_sql.dialects.append_routine import AppendRoutine

__all__ = ["PostgresAppendRoutine"]

_PG = PGDialect()  # type: ignore[no-untyped-call]

_ARGUMENTS = (
    "p_cid TEXT, p_now TIMESTAMPTZ, p_expires_at TIMESTAMPTZ, p_limit BIGINT, "
    "p_counter TEXT, p_batch JSON"
)
_ARGUMENT_TYPES = "TEXT, TIMESTAMPTZ, TIMESTAMPTZ, BIGINT, TEXT, JSON"

# The body. {m}, {c}, {e}: the messages, conversations and evicted-id tables.
# Comments name the Python each part translates.
_BODY = """
DECLARE
  v_next BIGINT; v_system_count INTEGER; v_other_count INTEGER;
  v_counter TEXT; v_system_weight BIGINT; v_other_weight BIGINT;
  v_expires TIMESTAMPTZ;
  v_n INTEGER;
  v_new_ids TEXT[]; v_new_roles TEXT[]; v_new_sizes BIGINT[];
  v_counted BOOLEAN := p_counter IS NULL;
  v_system_size BIGINT; v_stored BIGINT; v_total BIGINT; v_excess BIGINT;
  v_cut INTEGER := 0; v_index INTEGER := 0; v_dropped BIGINT := 0;
  v_last_user INTEGER; v_leading INTEGER := 0; v_found BOOLEAN := FALSE;
  v_known INTEGER := 0; v_id TEXT;
  v_evict INTEGER; v_drop_new INTEGER;
  v_evicted_size BIGINT := 0; v_kept_size BIGINT;
  v_ids TEXT[] := '{{}}'; v_seqs BIGINT[] := '{{}}';
  v_oldest REFCURSOR; v_reading BOOLEAN := TRUE; v_new INTEGER := 0;
  v_role TEXT; v_size BIGINT; v_seq BIGINT;
  v_read BIGINT[] := '{{}}'; v_read_ids TEXT[] := '{{}}';
  v_row TID; v_rows TID[] := '{{}}';
  v_read_sizes BIGINT[] := '{{}}';
  v_first BIGINT; v_last BIGINT; v_bound BIGINT;
  v_expired BOOLEAN := FALSE;
BEGIN
  outcome := 'declined';
  evicted_ids := '{{}}';
  -- The batch: one JSON array of rows, which the client packs faster than
  -- it binds six arrays.
  SELECT array_agg(k.id ORDER BY k.n), array_agg(k.role ORDER BY k.n),
      array_agg(k.size ORDER BY k.n)
    INTO v_new_ids, v_new_roles, v_new_sizes
    FROM ROWS FROM (json_to_recordset(p_batch) AS (id TEXT, role TEXT, size BIGINT))
      WITH ORDINALITY AS k(id, role, size, n);
  v_n := coalesce(cardinality(v_new_ids), 0);
  IF v_n = 0 OR 'system' = ANY (v_new_roles) THEN
    RETURN;
  END IF;
  -- The lock (dialect.lock_conversation): create the row or lock it.
  INSERT INTO {c} AS c (conversation_id, next_seq, version, system_count,
      other_count, weight_counter, system_weight, other_weight, updated_at,
      expires_at, created_at)
    VALUES (p_cid, 0, 0, 0, 0, NULL, 0, 0, p_now, NULL, p_now)
    ON CONFLICT (conversation_id) DO UPDATE SET version = c.version + 1
    RETURNING c.next_seq, c.system_count, c.other_count, c.weight_counter,
      c.system_weight, c.other_weight, c.expires_at
    INTO v_next, v_system_count, v_other_count, v_counter, v_system_weight,
      v_other_weight, v_expires;
  -- An expired conversation is forgotten (write_steps.forgotten), judged by
  -- the client's clock as of now, after the lock wait.
  IF v_expires IS NOT NULL
      AND v_expires <= p_now + (clock_timestamp() - statement_timestamp()) THEN
    DELETE FROM {m} WHERE conversation_id = p_cid;
    DELETE FROM {e} WHERE conversation_id = p_cid;
    v_system_count := 0;
    v_other_count := 0;
    v_expired := TRUE;
  END IF;
  IF v_system_count + v_other_count > 0 AND NOT v_counted
      AND v_counter IS DISTINCT FROM p_counter THEN
    RETURN;
  END IF;
  -- Stored or evicted ids: all of them make the append a no-op (a retry),
  -- some of them leave it to the portable path.
  -- One lookup of the unique key per id. A cached generic plan may think a
  -- conversation holds one row, and then filter it through the primary key
  -- at the same cost; ordering by the unique key's columns makes that path
  -- need a sort, so the unique key's lookup is chosen. ("= ANY (v_new_ids)" is
  -- filtered the same way.)
  FOREACH v_id IN ARRAY v_new_ids LOOP
    IF EXISTS (SELECT 1 FROM {m} WHERE conversation_id = p_cid AND message_id = v_id
               ORDER BY conversation_id, message_id LIMIT 1)
        OR EXISTS (SELECT 1 FROM {e}
                   WHERE conversation_id = p_cid AND message_id = v_id) THEN
      v_known := v_known + 1;
    END IF;
  END LOOP;
  IF v_known > 0 THEN
    IF v_known = v_n THEN
      outcome := 'known';
    END IF;
    RETURN;
  END IF;
  -- write_steps.stored_window: sizes from the row.
  IF v_counted THEN
    v_system_size := v_system_count;
    v_total := v_other_count;
  ELSIF v_system_count + v_other_count = 0 THEN
    v_system_size := 0;
    v_total := 0;
  ELSE
    v_system_size := coalesce(v_system_weight, 0);
    v_total := coalesce(v_other_weight, 0);
  END IF;
  v_stored := v_total;
  v_total := v_total + (SELECT sum(s) FROM unnest(v_new_sizes) AS s);
  v_excess := v_system_size + v_total - p_limit;
  -- window.count_evictions over the stored non-system rows, oldest first,
  -- then the new ones, read only as far as the answer needs (a cursor in
  -- the primary key's order: no sort of the whole conversation).
  OPEN v_oldest FOR
    SELECT ctid, seq, message_id, role,
        CASE WHEN v_counted THEN 1 ELSE weight END
      FROM {m} WHERE conversation_id = p_cid AND role <> 'system'
      ORDER BY seq;
  LOOP
    IF v_reading THEN
      FETCH v_oldest INTO v_row, v_seq, v_id, v_role, v_size;
      v_reading := FOUND;
      IF v_reading THEN
        v_rows := v_rows || v_row;
        v_read := v_read || v_seq;
        v_read_ids := v_read_ids || v_id;
        v_read_sizes := v_read_sizes || v_size;
      END IF;
    END IF;
    IF NOT v_reading THEN
      v_new := v_new + 1;
      EXIT WHEN v_new > v_n;
      v_role := v_new_roles[v_new];
      v_size := v_new_sizes[v_new];
    END IF;
    IF v_role = 'tool' AND v_leading = v_index THEN
      v_leading := v_leading + 1;
    END IF;
    IF v_excess <= 0 THEN
      -- Rule 4 alone: only leading tool messages go.
      EXIT WHEN v_role <> 'tool';
      v_cut := v_cut + 1;
    ELSIF v_dropped >= v_excess THEN
      IF v_role = 'user' THEN
        v_cut := v_index;
        v_found := TRUE;
        EXIT;
      END IF;
    ELSE
      IF v_role = 'user' THEN
        v_last_user := v_index;
      END IF;
      v_dropped := v_dropped + v_size;
    END IF;
    v_index := v_index + 1;
  END LOOP;
  CLOSE v_oldest;
  IF v_excess > 0 AND NOT v_found THEN
    -- No user message follows the cut: the newest turn stays whole; with no
    -- user message at all, the history less its leading tool messages.
    v_cut := coalesce(v_last_user, v_leading);
  END IF;
  -- append_plan.plan_append: the cut's stored rows go, then new ones.
  v_evict := least(v_cut, cardinality(v_read));
  v_drop_new := v_cut - v_evict;
  IF v_evict > 0 THEN
    v_seqs := v_read[1:v_evict];
    v_ids := v_read_ids[1:v_evict];
    SELECT sum(s) INTO v_evicted_size FROM unnest(v_read_sizes[1:v_evict]) AS s;
    -- Row by row, by the address the cursor read, which cannot change while
    -- the conversation is locked. A cached generic plan of any condition on
    -- conversation_id may think the conversation holds one row and filter
    -- all of it through either index; a single address is always one fetch.
    FOREACH v_row IN ARRAY v_rows[1:v_evict] LOOP
      DELETE FROM {m} WHERE ctid = v_row;
    END LOOP;
  END IF;
  INSERT INTO {m} (conversation_id, seq, message_id, role, content, payload,
      weight, created_at)
    SELECT p_cid, v_next + k.n - 1 - v_drop_new, k.id, k.role, k.content,
        k.payload, CASE WHEN v_counted THEN NULL ELSE k.size END, k.created
      FROM ROWS FROM (json_to_recordset(p_batch) AS (id TEXT, role TEXT,
          content TEXT, payload TEXT, size BIGINT, created TIMESTAMPTZ))
        WITH ORDINALITY AS k(id, role, content, payload, size, created, n)
      WHERE k.n > v_drop_new;
  SELECT coalesce(sum(s), 0) INTO v_kept_size
    FROM unnest(v_new_sizes) WITH ORDINALITY AS k(s, n) WHERE k.n > v_drop_new;
  -- write_steps.append_writes: new messages dropped at once are numbered
  -- after the inserted rows.
  IF v_drop_new > 0 THEN
    v_ids := v_ids || v_new_ids[1:v_drop_new];
    v_seqs := v_seqs || ARRAY(SELECT v_next + v_n - v_drop_new + g
                              FROM generate_series(0, v_drop_new - 1) AS g);
  END IF;
  IF v_cut > 0 THEN
    -- evicted_ids.trim_due and trim_below.
    v_first := v_seqs[1];
    v_last := v_seqs[cardinality(v_seqs)];
    v_bound := v_last - {kept};
    IF v_bound >= 0 AND v_first <= v_last
        AND (v_first / {step} <> v_last / {step} OR v_first % {step} = 0) THEN
      DELETE FROM {e} WHERE conversation_id = p_cid AND seq <= v_bound;
    END IF;
    INSERT INTO {e} (conversation_id, message_id, seq)
      SELECT p_cid, k.id, k.seq FROM unnest(v_ids, v_seqs) AS k(id, seq)
      WHERE k.seq > v_bound;
  END IF;
  -- An expired conversation starts a new record (no owner, no metadata).
  UPDATE {c} SET owner = CASE WHEN v_expired THEN NULL ELSE owner END,
      metadata = CASE WHEN v_expired THEN NULL ELSE metadata END,
      created_at = CASE WHEN v_expired THEN p_now ELSE created_at END,
      next_seq = v_next + v_n, version = version + 1,
      system_count = v_system_count,
      other_count = v_other_count - v_evict + (v_n - v_drop_new),
      weight_counter = p_counter,
      system_weight = CASE WHEN v_counted THEN NULL ELSE v_system_size END,
      other_weight = CASE WHEN v_counted THEN NULL
        ELSE v_stored - v_evicted_size + v_kept_size END,
      updated_at = p_now, expires_at = p_expires_at
    WHERE conversation_id = p_cid;
  outcome := 'appended';
  evicted_ids := v_ids;
END
"""


class PostgresAppendRoutine(AppendRoutine):
    """PostgreSQL's: a PL/pgSQL function returning ``outcome, evicted_ids``."""

    __slots__ = ()

    sql_dialect = _PG

    def call_sql(self) -> str:
        """``SELECT outcome, evicted_ids FROM name(...)``."""
        return (
            f"SELECT outcome, evicted_ids FROM {self.qualified}(:cid, :now, "
            ":expires_at, :limit, :counter, CAST(:batch AS JSON))"
        )

    def create_sql(self) -> str:
        """``CREATE FUNCTION``."""
        body = _BODY.format(
            **self.table_names(), kept=EVICTED_IDS_KEPT, step=EVICTED_IDS_TRIM_STEP
        )
        return (
            f"CREATE FUNCTION {self.qualified}({_ARGUMENTS}, "
            "OUT outcome TEXT, OUT evicted_ids TEXT[]) "
            f"LANGUAGE plpgsql AS $chatledger${body}$chatledger$"
        )

    def exists_sql_of(self, name: str) -> str:
        """``to_regprocedure`` of the function's signature."""
        qualified = self._qualify(name, self._tables.messages.schema)
        signature = f"{qualified}({_ARGUMENT_TYPES})"
        return f"SELECT to_regprocedure('{signature}')"

    def drop_sql_of(self, qualified: str) -> str:
        """``DROP FUNCTION IF EXISTS``, by the signature every version had."""
        return f"DROP FUNCTION IF EXISTS {qualified}({_ARGUMENT_TYPES})"

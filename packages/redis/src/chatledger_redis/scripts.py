"""The Lua scripts that make every write one atomic step on the server.

Example (needs a Redis server and a conversation's keys):
    from chatledger_redis.scripts import APPEND

    script = client.register_script(APPEND)   # EVALSHA, reloaded on NOSCRIPT
    script(keys=keys.all(), args=[...])

Each script receives every key it touches in ``KEYS`` (one hash slot, see
:mod:`chatledger_redis.keys`) and runs alone on the server, so no other
command sees a half-written conversation. Each one writes one entry per
``redis.call`` (or deletes a bounded chunk per call) instead of ``unpack``-ing
a whole batch, so a batch of any length stays clear of Lua's stack limit.

Every write ends by giving all the keys of a conversation the same absolute
expiry (``PEXPIREAT`` from the server clock) or none (``PERSIST``), so they
never drift apart. The ``exp`` field of ``meta`` records which one the last
write chose (``"1"`` or ``"0"``): a write without a TTL on a conversation
whose ``exp`` is ``"0"`` has nothing to persist and skips the ``PERSIST``
calls. A missing ``exp`` (a conversation written before the
field existed) is treated as possibly expiring.

An append takes one argument per message, so the client packs few
arguments: ``<role code><size>\\n<id>\\n[<canonical text>\\n]<codec JSON>``
(the canonical text for system messages only). The separators are safe: a
message id is printable (no newline) and JSON text escapes every newline.

Rule 1 (:mod:`chatledger.window`) is one piece of Lua that both appends run,
the window's (:data:`APPEND`) and the log's (:data:`APPEND_LOG`): it compares
the :func:`~chatledger.window.system_key` texts of the batch's system
messages with those of the current system set, which is the tail of the
``system`` list from ``meta``'s ``sb`` field on (the batch of the latest
append that stored a system message, :func:`chatledger.window_view.current_system`;
no ``sb``, as in every conversation a window or ``save_all`` wrote, means
batch 0: the whole list). A window append that replaces the set deletes it;
a log append keeps it (the log keeps every message) and moves ``sb``. Each
system marker an append writes ends with that append's batch
(:mod:`chatledger_redis.markers`), which a removal of the whole current set
reads to move ``sb`` back (:data:`REMOVE`).

The window append also keeps the evicted-id record
(:mod:`chatledger.evicted_ids`): every id it takes out of the window
(evicted, a replaced system message, a new message dropped at once) stays in
the ``ids`` hash with an empty value instead of being deleted, and is pushed
on the ``evicted`` list. So the one ``HMGET`` that tells stored ids from
fresh ones also finds an evicted id, and a late retry is a no-op (of a log
append too); the list keeps the order, and when it holds more than the
bound plus the step the client passes (core's ``EVICTED_IDS_KEPT`` and
``EVICTED_IDS_TRIM_STEP``), all but its newest ``EVICTED_IDS_KEPT`` ids
leave both the list and the hash: ``forget_oldest`` translates core's
``list_trim_count``, so a long conversation trims about once per step
evictions instead of spending two commands on every evicting append.

A bounded log (:mod:`chatledger.retention`) is trimmed by :data:`TRIM`,
a script of its own that runs after the append that made the trim due, so
every other append stays one script; it removes the oldest messages as a
window's eviction does (the head of the turns list, the superseded system
markers at the head of the system list) and records their ids the same way.

:data:`REMOVE` takes messages back on request (``SupportsLogRemoval``): the
newest, or those of named ids, with their markers, ids and sizes, in one
script; the ids are forgotten rather than recorded as evicted, and rule 1
runs again over what is left. It leaves a receipt under its write token, so
the same removal sent again (a client's retry after a lost reply) answers
the same messages and removes no others.

Reads of the log (:data:`VIEW`, :data:`TAIL`, :data:`PAGE`) are scripts too,
so each is one round trip and sees one state of the conversation. They read
messages by sequence number, in ranges that stop at the head of the turns
list: a window evicts only the oldest non-system messages, so from there on
every number holds a message but for the system messages a window replaced
and the messages a removal took, and before it only system messages are left
(each with its marker in the system list). A read therefore costs about what
it returns, whatever the log's length or what a window evicted from it, plus
one number for each message removed from the range it reads.
"""

from __future__ import annotations

__all__ = [
    "APPEND",
    "APPEND_LOG",
    "DELETE",
    "INDEX",
    "INFO",
    "PAGE",
    "REMOVE",
    "RESIZE",
    "SAVE",
    "SET_INFO",
    "TAIL",
    "TRIM",
    "VIEW",
]

# Shared tail: the sliding TTL of the whole conversation, in one place.
_EXPIRE = """
local function expire(keys, ttl, expiring)
  if ttl > 0 then
    local now = redis.call('TIME')
    local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
    local stamp = string.format('%d', at)
    for _, key in ipairs(keys) do redis.call('PEXPIREAT', key, stamp) end
  elseif expiring then
    for _, key in ipairs(keys) do redis.call('PERSIST', key) end
  end
end

local function hdel_all(key, fields)
  for i = 1, #fields, 256 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 255, #fields)))
  end
end
"""

# The conversation's record (its info key) and the listing index. A write
# to the messages moves updated_at to the server's clock, never back; every
# record write takes a new version, the microsecond of the write or one past
# the last, which orders the index's updates. index_apply writes the index
# keys from what a record says (u false: no record), unless the index holds
# a version as new already.
_RECORD = """
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- owner: nil keeps it, false clears it, a string sets it. Returns the new
-- version, updated_at, owner, and the id the record holds (false: none yet).
local function record_write(info, moved, owner)
  local state = redis.call('HMGET', info, 'u', 'v', 'o', 'i')
  local now = now_us()
  local ms = math.floor(now / 1000)
  local v = now
  if state[2] and tonumber(state[2]) >= v then v = tonumber(state[2]) + 1 end
  local fields = {'v', string.format('%d', v)}
  local u = ms
  if state[1] == false then
    fields[3], fields[4], fields[5], fields[6] = 'c', string.format('%d', ms), 'u',
      string.format('%d', ms)
  else
    u = tonumber(state[1])
    if moved and ms > u then
      u = ms
      fields[3], fields[4] = 'u', string.format('%d', ms)
    end
  end
  local held = state[3]
  if owner == false then
    held = false
    redis.call('HDEL', info, 'o')
  elseif owner ~= nil then
    held = owner
    fields[#fields + 1] = 'o'
    fields[#fields + 1] = owner
  end
  redis.call('HSET', info, unpack(fields))
  return v, u, held, state[4]
end

local function index_entry(v, u, owner)
  local entry = string.format('%d:%d', v, u)
  if owner then entry = entry .. ':' .. owner end
  return entry
end

local function index_member(u, id)
  return string.format('%015d', u) .. '\\0' .. id
end

local function index_drop(index, id, held)
  local hu, rest = string.match(held, '^%d+:(%d+)(.*)$')
  local member = index_member(tonumber(hu), id)
  redis.call('ZREM', index[1], member)
  if rest ~= '' then
    redis.call('ZREM', index[2], string.sub(rest, 2) .. '\\0' .. member)
  end
end

local function index_apply(index, id, v, u, owner)
  local held = redis.call('HGET', index[3], id)
  if held then
    if tonumber(string.match(held, '^(%d+):')) >= v then return end
    index_drop(index, id, held)
  end
  if not u then
    if held then redis.call('HDEL', index[3], id) end
    return
  end
  local member = index_member(u, id)
  redis.call('ZADD', index[1], 0, member)
  if owner then redis.call('ZADD', index[2], 0, owner .. '\\0' .. member) end
  redis.call('HSET', index[3], id, index_entry(v, u, owner))
end

-- the id whose tag (unpadded base64url) names the key, four characters at
-- a time by arithmetic on their bytes: a lookup of each character in the
-- alphabet cost about 17 us for a UUID's tag, this about 6
local function sextet(b)
  if b == nil then return nil end
  if b == 95 then return 63             -- _
  elseif b >= 97 then return b - 71     -- a-z: 26..51
  elseif b >= 65 then return b - 65     -- A-Z: 0..25
  elseif b >= 48 then return b + 4 end  -- 0-9: 52..61
  return 62                             -- -
end

local function tag_id(key)
  local tag = string.match(key, '{([%w_%-]+)}')
  local byte, char, out = string.byte, string.char, {}
  for i = 1, #tag, 4 do
    local a, b, c, d = byte(tag, i, i + 3)
    a, b, c, d = sextet(a), sextet(b), sextet(c), sextet(d)
    local n = a * 262144 + b * 4096 + (c or 0) * 64 + (d or 0)
    local low = n % 65536
    local last = low % 256
    if d then out[#out + 1] = char((n - low) / 65536, (low - last) / 256, last)
    elseif c then out[#out + 1] = char((n - low) / 65536, (low - last) / 256)
    else out[#out + 1] = char((n - low) / 65536) end
  end
  return table.concat(out)
end

-- The index update of a record write. On plain Redis the index keys follow
-- the record key in KEYS (from at on) and the script updates them itself:
-- answers ''. On Redis Cluster they are in another slot: answers the
-- update, which the client sends to the INDEX script. id: what the record
-- (KEYS[at - 1]) holds of it, if anything; else the key's tag is decoded and,
-- for a record that stays, kept in it for the next write's HMGET.
local function publish(at, v, u, owner, id)
  if KEYS[at] then
    if not id then
      id = tag_id(KEYS[1])
      if u then redis.call('HSET', KEYS[at - 1], 'i', id) end
    end
    index_apply({KEYS[at], KEYS[at + 1], KEYS[at + 2]}, id, v, u, owner)
    return ''
  end
  if not u then return string.format('%d:-', v) end
  return index_entry(v, u, owner)
end
"""

# Variadic commands in bounded chunks, and the evicted-id record's order.
_CHUNKS = """
local function hset_pairs(key, pairs)
  for i = 1, #pairs, 256 do
    redis.call('HSET', key, unpack(pairs, i, math.min(i + 255, #pairs)))
  end
end

local function rpush_all(key, values)
  local length = 0
  for i = 1, #values, 256 do
    length = redis.call('RPUSH', key, unpack(values, i, math.min(i + 255, #values)))
  end
  return length
end

local function hmget_all(key, fields)
  local values = {}
  for i = 1, #fields, 256 do
    local part = redis.call('HMGET', key, unpack(fields, i, math.min(i + 255, #fields)))
    for j = 1, #part do values[i + j - 1] = part[j] end
  end
  return values
end

local function forget_oldest(ids, record, length, keep, step)
  if length > keep + step then
    hdel_all(ids, redis.call('LPOP', record, length - keep))
  end
end
"""

# The current system set: the system markers of the latest append that
# stored any. The system list holds a marker per stored system message in
# sequence order, so they are its tail from the batch number (meta's sb) on;
# batch 0 (no sb: written by a window or save_all) is the whole list.
_CURRENT_SYSTEM = """
local function current_system(system, batch)
  if batch == 0 then return redis.call('LRANGE', system, 0, -1) end
  local newest, read, step, older = {}, 0, 4, false
  while not older do
    local part = redis.call('LRANGE', system, -(read + step), -(read + 1))
    for i = #part, 1, -1 do
      if tonumber(string.match(part[i], '^%d+:(%d+):')) < batch then
        older = true
        break
      end
      newest[#newest + 1] = part[i]
    end
    if #part < step then break end
    read = read + step
    step = step * 2
  end
  local shown = {}
  for i = #newest, 1, -1 do shown[#shown + 1] = newest[i] end
  return shown
end
"""

# What both appends share: the batch read from ARGV[2..] less the ids the
# conversation holds or held, rule 1 (merge_system against the current
# system set, by system_key text), and the numbering of what is left.
_APPEND_STEPS = (
    _CURRENT_SYSTEM
    + """
-- a message whose id is stored already, or was evicted (then ids holds it
-- with an empty value), is a retry: skip it. One HMGET per 256 ids.
local function fresh_messages(ids)
  local n = #ARGV - 1
  local batch_ids, bounds = {}, {}
  for i = 1, n do
    local entry = ARGV[i + 1]
    local a = string.find(entry, '\\n', 1, true)
    local b = string.find(entry, '\\n', a + 1, true)
    batch_ids[i] = string.sub(entry, a + 1, b - 1)
    bounds[i] = {a, b}
  end
  local stored = hmget_all(ids, batch_ids)
  local fresh = {}
  local with_system = false
  for i = 1, n do
    if stored[i] == false then
      local entry, a, b = ARGV[i + 1], bounds[i][1], bounds[i][2]
      local role = string.sub(entry, 1, 1)
      local m = {index = i - 1, role = role, id = batch_ids[i],
        size = tonumber(string.sub(entry, 2, a - 1))}
      if role == 's' then
        local c = string.find(entry, '\\n', b + 1, true)
        m.canon = string.sub(entry, b + 1, c - 1)
        m.json = string.sub(entry, c + 1)
        with_system = true
      else
        m.json = string.sub(entry, b + 1)
      end
      fresh[#fresh + 1] = m
    end
  end
  return fresh, with_system
end

-- Rule 1: an unknown system message replaces the current set; the set's
-- markers are read only when the batch holds a system message. Returns
-- whether the set is replaced, the texts a system message of the batch is
-- skipped for, and {seq, id} of each message of the current set.
local function system_rule(system, batch, fresh, with_system)
  local known, current = {}, {}
  if not with_system then return false, known, current end
  for i, entry in ipairs(current_system(system, batch)) do
    local _, seq, idlen, rest = string.match(entry, '^(%d+):(%d+):(%d+):(.*)$')
    idlen = tonumber(idlen)
    current[i] = {seq, string.sub(rest, 1, idlen)}
    -- the system key, less the marker's batch after it (a newline first)
    local key = string.sub(rest, idlen + 1)
    local tag = string.find(key, '\\n', 1, true)
    if tag then key = string.sub(key, 1, tag - 1) end
    known[key] = true
  end
  for _, m in ipairs(fresh) do
    if m.role == 's' and not known[m.canon] then return true, {}, current end
  end
  return false, known, current
end

-- Number what rule 1 keeps from next_seq on: the bodies, the ids marks and
-- the markers to write, one variadic write per key, and their sizes. A
-- system marker ends with the append's batch, the number of its first message.
local function number_fresh(fresh, known, next_seq)
  local out = {appended = {}, bodies = {}, id_marks = {}, turns = {}, system = {},
    tsize = 0, ssize = 0, first = next_seq}
  local tag = '\\n' .. string.format('%d', next_seq)
  for _, m in ipairs(fresh) do
    local keep = true
    if m.role == 's' then
      if known[m.canon] then keep = false else known[m.canon] = true end
    end
    if keep then
      local id, size = m.id, m.size
      local seq = string.format('%d', next_seq)
      next_seq = next_seq + 1
      out.bodies[#out.bodies + 1] = seq
      out.bodies[#out.bodies + 1] = m.json
      out.id_marks[#out.id_marks + 1] = id
      out.id_marks[#out.id_marks + 1] = seq
      if m.role == 's' then
        out.system[#out.system + 1] =
          size .. ':' .. seq .. ':' .. string.len(id) .. ':' .. id .. m.canon .. tag
        out.ssize = out.ssize + size
      else
        out.turns[#out.turns + 1] = m.role .. ':' .. size .. ':' .. seq .. ':' .. id
        out.tsize = out.tsize + size
      end
      out.appended[#out.appended + 1] = m.index
    end
  end
  out.next = next_seq
  return out
end

-- The first item of an append's reply: 1 when the whole batch was appended,
-- else the appended batch indexes as one comma-separated string.
local function appended_reply(out)
  if #out.appended == #ARGV - 1 then return 1 end
  return table.concat(out.appended, ',')
end
"""
)

#: Append a batch and trim the window (``SupportsWindowAppend``).
#:
#: KEYS: meta, msgs, turns, system, ids, evicted.
#: ARGV[1]: ``<limit>:<ttl ms, 0 = none>:<ids kept>:<trim step>:<write
#: token>:<counter id>`` (ids kept and trim step: the bound of the evicted-id
#: record and how far past it the record grows before a trim; the counter id,
#: ``""`` when every message weighs 1, comes last so it may hold any
#: character).
#: ARGV[2..]: one per message, see the module docstring.
#: Returns -1 when the stored sizes were not all measured by the window's
#: counter (the caller re-measures and retries), else a flat array: first the
#: integer 1 when every message of the batch was appended, otherwise the
#: appended batch indexes as one comma-separated string; then the evicted ids.
APPEND = (
    _EXPIRE
    + _CHUNKS
    + _RECORD
    + _APPEND_STEPS
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local record, info = KEYS[6], KEYS[7]
local conversation = {meta, msgs, turns, system, ids, record, info}
local head = ARGV[1]
local c1 = string.find(head, ':', 1, true)
local c2 = string.find(head, ':', c1 + 1, true)
local c3 = string.find(head, ':', c2 + 1, true)
local c4 = string.find(head, ':', c3 + 1, true)
local c5 = string.find(head, ':', c4 + 1, true)
local limit = tonumber(string.sub(head, 1, c1 - 1))
local ttl = tonumber(string.sub(head, c1 + 1, c2 - 1))
local keep = tonumber(string.sub(head, c2 + 1, c3 - 1))
local step = tonumber(string.sub(head, c3 + 1, c4 - 1))
local token = string.sub(head, c4 + 1, c5 - 1)
local counter = string.sub(head, c5 + 1)

-- (a) skip the ids stored or evicted
local fresh, with_system = fresh_messages(ids)
if #fresh == 0 then return {'', ''} end

-- hn: the write token of the last append that left the turns list
-- non-empty with a head that is not a tool response (every append leaves it
-- so, or empty). Every other write sets another ver, or drops meta, so only
-- hn == ver says the head needs no look. sized: a log append measured only
-- the rows from there on with ctr
local state = redis.call('HMGET', meta, 'next', 'ctr', 'tsize', 'ssize', 'exp', 'ver',
  'hn', 'sized', 'sb')
local exists = state[1] ~= false
if counter ~= '' and exists and (state[2] ~= counter or state[8] ~= false) then
  return -1
end
local weighed = counter ~= ''
local batch = tonumber(state[9] or '0')
local next_seq, tsize, ssize = 0, 0, 0
if exists then
  next_seq = tonumber(state[1])
  -- without a counter the stored sizes are marker counts, unless another
  -- counter measured them (or a write older than the exp field made them)
  if weighed or (state[2] == '' and state[5] ~= false) then
    tsize, ssize = tonumber(state[3]), tonumber(state[4])
  elseif batch == 0 then
    tsize, ssize = redis.call('LLEN', turns), redis.call('LLEN', system)
  else
    tsize, ssize = redis.call('LLEN', turns), #current_system(system, batch)
  end
end
local settled_head = exists and state[7] == state[6]

-- (b) the system rule: a replaced set leaves the window (its markers are
-- the tail of the system list)
local replace, known, current = system_rule(system, batch, fresh, with_system)
local evicted = {}
if replace then
  local seqs = {}
  for i, entry in ipairs(current) do
    seqs[i] = entry[1]
    evicted[i] = entry[2]
  end
  if #seqs > 0 then
    hdel_all(msgs, seqs)
    redis.call('LTRIM', system, 0, -(#seqs + 1))
  end
  ssize = 0
end

-- (c) append what is left, with the next sequence numbers: one variadic
-- write per key; the ids marks wait for (d), which may add evicted ones
local out = number_fresh(fresh, known, next_seq)
next_seq = out.next
tsize = tsize + out.tsize
ssize = ssize + out.ssize
hset_pairs(msgs, out.bodies)
rpush_all(system, out.system)
rpush_all(turns, out.turns)

-- (d) count_evictions, streaming the oldest markers only while it must;
-- tsize and ssize are the counts of the markers when no counter is named.
-- Without an overflow only leading tool responses go (rule 4): the head
-- marker alone is read, and not even that when hn says the head stays.
local excess = ssize + tsize - limit
local emptied = false
if excess > 0 or not settled_head then
  local dropped, last_user, leading, count, index, cut = 0, -1, 0, 0, 0, -1
  local read, start, step = {}, 0, 8
  if excess <= 0 then step = 1 end
  while cut < 0 do
    local part = redis.call('LRANGE', turns, start, start + step - 1)
    if #part == 0 then break end
    for _, entry in ipairs(part) do
      local role, size, seq, id = string.match(entry, '^(%a):(%d+):(%d+):(.*)$')
      if weighed then size = tonumber(size) else size = 1 end
      read[index + 1] = {seq, id, size}
      count = index + 1
      if role == 't' and leading == index then leading = count end
      if excess <= 0 then
        if role ~= 't' then cut = index break end
      elseif dropped >= excess then
        if role == 'u' then cut = index break end
      else
        if role == 'u' then last_user = index end
        dropped = dropped + size
      end
      index = index + 1
    end
    start = start + #part
    if step < 1024 then step = step * 2 end
  end
  if cut < 0 then
    -- the whole list was read: no user message follows the cut, so the
    -- newest turn stays; with no user message at all, the whole history
    -- less its leading tool responses
    if last_user < 0 then cut = leading else cut = last_user end
    emptied = cut == count
  end
  if cut > 0 then
    local seqs = {}
    for i = 1, cut do
      seqs[i] = read[i][1]
      evicted[#evicted + 1] = read[i][2]
      tsize = tsize - read[i][3]
    end
    hdel_all(msgs, seqs)
    redis.call('LTRIM', turns, cut, -1)
  end
end

local reply = {appended_reply(out)}
for i, id in ipairs(evicted) do reply[i + 1] = id end

-- the record moves with what was stored or evicted, last before the
-- expiry; the index update ends the reply. A new conversation whose batch
-- the window dropped whole stored nothing: it gets no record
local function moved(emptied_new)
  if emptied_new or (#out.appended == 0 and #evicted == 0) then return '' end
  local v, u, owner, id = record_write(info, true)
  return publish(8, v, u, owner, id)
end

-- (e) the ids marks in one write: appended ids map to their sequence
-- number, evicted ones (the evicted-id record) to an empty value, later
-- pairs winning as the script's order says; the record keeps the order and
-- its bound. An emptied conversation leaves only the record (ids then holds
-- its marks alone); otherwise slide the TTL
local id_marks = out.id_marks
for _, id in ipairs(evicted) do
  id_marks[#id_marks + 1] = id
  id_marks[#id_marks + 1] = ''
end
hset_pairs(ids, id_marks)
local expiring = state[5] ~= '0'
if #evicted > 0 then
  forget_oldest(ids, record, rpush_all(record, evicted), keep, step)
  -- a turn marker left means its message is left: msgs is only counted
  -- when the turns list was emptied
  if emptied and redis.call('HLEN', msgs) == 0 then
    redis.call('DEL', meta, msgs, turns, system)
    reply[#reply + 1] = moved(not exists)
    expire({ids, record, info}, ttl, expiring)
    return reply
  end
end
local flag = '0'
if ttl > 0 then flag = '1' end
local hn = ''
if not emptied then hn = token end
local fields = {'next', string.format('%d', next_seq), 'ctr', counter,
  'tsize', string.format('%d', tsize), 'ssize', string.format('%d', ssize),
  'ver', token, 'exp', flag, 'hn', hn}
if #out.system > 0 then
  fields[#fields + 1] = 'sb'
  fields[#fields + 1] = string.format('%d', out.first)
end
redis.call('HSET', meta, unpack(fields))
reply[#reply + 1] = moved()
expire(conversation, ttl, expiring)
return reply
"""
)

#: Append a batch to the log (``SupportsLog``): nothing leaves it.
#:
#: KEYS: meta, msgs, turns, system, ids, evicted (only its expiry is set).
#: ARGV[1]: ``<ttl ms, 0 = none>:<write token>:<counter id>`` (the counter id,
#: ``""`` when no size is stored, comes last so it may hold any character).
#: ARGV[2..]: one per message, see the module docstring.
#: Returns the integer 1 when every message of the batch was appended,
#: otherwise the appended batch indexes as one comma-separated string; then,
#: when any was, the sequence number of the last one (the appended ones are
#: numbered without a gap up to it, so a bounded log knows whether this
#: append makes a trim due, :data:`TRIM`).
#:
#: ``meta``'s totals stay those the window append reads: under ``ctr`` the
#: stored sizes, without one the marker counts. Sizes measured by a counter
#: that is not ``ctr`` are stored for the new rows only, and ``sized`` says
#: from which sequence number on the markers carry them (the window append
#: then re-measures, and a view measures the older rows itself).
APPEND_LOG = (
    _EXPIRE
    + _CHUNKS
    + _RECORD
    + _APPEND_STEPS
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local conversation = {meta, msgs, turns, system, ids, KEYS[6], KEYS[7]}
local head = ARGV[1]
local c1 = string.find(head, ':', 1, true)
local c2 = string.find(head, ':', c1 + 1, true)
local ttl = tonumber(string.sub(head, 1, c1 - 1))
local token = string.sub(head, c1 + 1, c2 - 1)
local counter = string.sub(head, c2 + 1)

local fresh, with_system = fresh_messages(ids)
if #fresh == 0 then return {'', ''} end

local state = redis.call('HMGET', meta, 'next', 'ctr', 'tsize', 'ssize', 'exp', 'sized',
  'sb')
local exists = state[1] ~= false
local batch = tonumber(state[7] or '0')
local next_seq = 0
if exists then next_seq = tonumber(state[1]) end

-- rule 1: a replaced set stays in the log; sb moves to this append
local replace, known = system_rule(system, batch, fresh, with_system)
local out = number_fresh(fresh, known, next_seq)
hset_pairs(msgs, out.bodies)
rpush_all(system, out.system)
local turn_count = rpush_all(turns, out.turns)
hset_pairs(ids, out.id_marks)

local flag = '0'
if ttl > 0 then flag = '1' end
local fields = {'next', string.format('%d', out.next), 'ctr', counter, 'ver', token,
  'exp', flag}
if replace then
  fields[#fields + 1] = 'sb'
  fields[#fields + 1] = string.format('%d', out.first)
end
local tsize, ssize = out.tsize, out.ssize
local weighed = counter ~= ''
local totals = not exists or (state[2] == counter and
  ((weighed and state[6] == false) or (not weighed and state[5] ~= false)))
if totals then
  -- the stored totals count in this append's measure: add to them
  if exists then
    tsize = tsize + tonumber(state[3])
    if not replace then ssize = ssize + tonumber(state[4]) end
  end
elseif weighed then
  -- only the rows from here on are measured by this counter
  if state[2] ~= counter then
    fields[#fields + 1] = 'sized'
    fields[#fields + 1] = string.format('%d', out.first)
  end
else
  -- back to marker counts
  if #out.turns == 0 then turn_count = redis.call('LLEN', turns) end
  tsize = turn_count
  if not replace then
    if batch == 0 then
      ssize = redis.call('LLEN', system)
    else
      ssize = #current_system(system, batch)
    end
  end
end
fields[#fields + 1] = 'tsize'
fields[#fields + 1] = string.format('%d', tsize)
fields[#fields + 1] = 'ssize'
fields[#fields + 1] = string.format('%d', ssize)
redis.call('HSET', meta, unpack(fields))
local op = ''
if #out.appended > 0 then
  local v, u, owner, id = record_write(KEYS[7], true)
  op = publish(8, v, u, owner, id)
end
expire(conversation, ttl, state[5] ~= '0')
return {appended_reply(out), out.next - 1, op}
"""
)

#: Trim a bounded log (:mod:`chatledger.retention`) after an append made it due.
#:
#: KEYS: meta, msgs, turns, system, ids, evicted.
#: ARGV: the sequence number of the append's last message and its id, the
#: number of the oldest of the newest ``n`` (core's
#: :meth:`~chatledger.retention.Retention.first_kept`), the number of the
#: oldest non-system message the append's window view shows (``""`` without
#: a window), the bound and trim step of the evicted-id record, a write
#: token. Returns how many messages it removed: 0 too when the message the
#: append ended on is gone or numbered otherwise (``save_all``, a delete or
#: expiry came between), since the numbers are not the append's then.
#:
#: Two rules of core run here, as translations: ``user_from`` is the first
#: user marker numbered from the first kept through the append's last (a
#: later append's messages are not this append's log), and the cutoff is
#: :meth:`~chatledger.retention.Retention.cutoff`: that user message, or the
#: first kept without one, and never past the view's oldest. Below it go
#: every turn marker (a prefix of the turns list) and every system marker
#: older than ``sb`` (a prefix of the system list: from ``sb`` on is the
#: current set, ``current_system``, which stays); the scan of the turns list
#: stops at the user message it looks for, so a trim reads what it removes
#: and the markers up to the first user message of what it keeps. The
#: removed ids join the evicted-id record as the window append's evictions
#: do (``forget_oldest``), ``tsize`` loses what the removed markers
#: weighed (one each when ``ctr`` is ``""``: the totals are counts then), and
#: ``ver`` changes, so a re-measure read before the trim writes nothing and
#: the next window append looks at the head of the turns list again. A new
#: ``evicted`` list takes the conversation's deadline from ``meta``.
TRIM = (
    _EXPIRE
    + _CHUNKS
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local record = KEYS[6]
local last = tonumber(ARGV[1])
if redis.call('HGET', ids, ARGV[2]) ~= ARGV[1] then return 0 end
local first_kept = tonumber(ARGV[3])
local shown_from = tonumber(ARGV[4])
local keep, step = tonumber(ARGV[5]), tonumber(ARGV[6])
local state = redis.call('HMGET', meta, 'ctr', 'tsize', 'sb')
local weighed = state[1] ~= '' and state[1] ~= false

-- the turn markers from the head up to the first user message numbered
-- first_kept..last (user_from), or past last
local read, user_from, start, chunk, done = {}, nil, 0, 8, false
while not done do
  local part = redis.call('LRANGE', turns, start, start + chunk - 1)
  if #part == 0 then break end
  for _, entry in ipairs(part) do
    local role, size, seq, id = string.match(entry, '^(%a):(%d+):(%d+):(.*)$')
    seq = tonumber(seq)
    if seq > last then done = true break end
    if role == 'u' and seq >= first_kept then user_from = seq done = true break end
    read[#read + 1] = {seq, id, tonumber(size)}
  end
  start = start + #part
  if chunk < 1024 then chunk = chunk * 2 end
end
local cutoff = user_from or first_kept
if shown_from and shown_from < cutoff then cutoff = shown_from end

-- below the cutoff: the leading turn markers, and the system markers before
-- the current set (those older than sb; sb absent means every one is current)
local gone, seqs, turn_cut, weight = {}, {}, 0, 0
while turn_cut < #read and read[turn_cut + 1][1] < cutoff do
  turn_cut = turn_cut + 1
  weight = weight + (weighed and read[turn_cut][3] or 1)
end
local older = {}
local batch = tonumber(state[3] or '0')
local bound = math.min(batch, cutoff)
start, chunk, done = 0, 8, bound <= 0
while not done do
  local part = redis.call('LRANGE', system, start, start + chunk - 1)
  for _, entry in ipairs(part) do
    local seq, idlen, rest = string.match(entry, '^%d+:(%d+):(%d+):(.*)$')
    seq = tonumber(seq)
    if seq >= bound then done = true break end
    older[#older + 1] = {seq, string.sub(rest, 1, tonumber(idlen))}
  end
  if #part < chunk then break end
  start = start + #part
  if chunk < 1024 then chunk = chunk * 2 end
end
if turn_cut + #older == 0 then return 0 end

-- oldest first, as a window append records what it takes out
local t, o = 1, 1
while t <= turn_cut or o <= #older do
  local row
  if o > #older or (t <= turn_cut and read[t][1] < older[o][1]) then
    row = read[t]
    t = t + 1
  else
    row = older[o]
    o = o + 1
  end
  seqs[#seqs + 1] = string.format('%d', row[1])
  gone[#gone + 1] = row[2]
end
hdel_all(msgs, seqs)
if turn_cut > 0 then redis.call('LTRIM', turns, turn_cut, -1) end
if #older > 0 then redis.call('LTRIM', system, #older, -1) end
local marks = {}
for _, id in ipairs(gone) do
  marks[#marks + 1] = id
  marks[#marks + 1] = ''
end
hset_pairs(ids, marks)
local length = rpush_all(record, gone)
if length == #gone then
  -- a new record: the conversation's deadline, read from meta
  local at = redis.pcall('PEXPIRETIME', meta)
  if type(at) == 'number' then
    if at > 0 then redis.call('PEXPIREAT', record, at) end
  else
    local ttl = redis.call('PTTL', meta)
    if ttl > 0 then redis.call('PEXPIRE', record, ttl) end
  end
end
forget_oldest(ids, record, length, keep, step)
local tsize = tonumber(state[2] or '0') - weight
redis.call('HSET', meta, 'tsize', string.format('%d', tsize), 'ver', ARGV[7])
return #gone
"""
)

#: Remove messages from a log on request (``SupportsLogRemoval``).
#:
#: KEYS: meta, msgs, turns, system, ids, evicted (only its expiry is set),
#: removals (the receipts).
#: ARGV[1]: ``<n or i>:<ttl ms, 0 = none>:<receipts kept>:<receipt
#: ms>:<write token>``; then, for ``n`` (the newest), how many; for ``i``,
#: the ids named, each once.
#: Returns the removed messages' codec JSON, oldest first; ``[]`` when
#: nothing was removed, and then nothing was written.
#:
#: Sent again, it answers the same and changes nothing. A client sends a
#: command again when its reply did not come (a dropped connection, a
#: timeout), although the server may have run it; a removal run twice
#: would take other messages the second time and answer only those, and
#: the first ones would be gone unseen. So each removal that removed
#: anything leaves a receipt under its write token in ``removals``: its
#: answer (each message as ``<length>:<JSON>``, one string). The script
#: first looks for its own token there, and when it finds it answers the
#: stored messages and writes nothing. The receipts are a ring of the
#: latest ``receipts kept`` removals of the conversation (``@<slot>``
#: names the token in a slot, ``#`` counts the removals), whose key expires
#: ``receipt ms`` after the latest one
#: (:data:`~chatledger_redis.steps.REMOVAL_RECEIPTS` and
#: :data:`~chatledger_redis.steps.REMOVAL_RECEIPT_MS` say why the numbers);
#: it is no key the conversation's TTL or an emptying removal touches. A
#: removal that removed nothing leaves no receipt: sent again it may remove
#: what an append stored meanwhile, and answers it, as a removal that ran
#: then would have.
#:
#: The newest are the tails of the turns and the system lists, merged by
#: number and cut off with ``LTRIM``. A named id is found in ``ids`` (an
#: empty value marks an evicted id: not held), and its marker by a binary
#: search of the system list, then of the turns list, by number (``LINDEX``,
#: both lists being in number order), and taken out with ``LREM`` from the
#: nearer end. The removed ids leave ``ids`` (forgotten, not recorded as
#: evicted) and their messages ``msgs``; ``next`` stays, so numbers are not
#: reused. Under a counter the totals lose the removed markers' sizes;
#: without one they are the marker counts, counted again (``LLEN``, the
#: current set) when a write older than ``exp`` left them of unknown standing.
#: ``ver`` changes (a re-measure read before writes nothing, and the next
#: window append looks at the head of the turns list again: a tool response
#: may be there now) and the TTL slides, as for any write.
#:
#: Rule 1 runs here as a translation of core's
#: :func:`~chatledger.window_view.current_system` over what is left: when
#: the current set (the system markers from ``sb`` on) lost every member,
#: the current set is that of the batch the newest system marker left
#: records (:mod:`chatledger_redis.markers`), the tail of the system list
#: from that batch on; ``sb`` moves back to it, and ``ssize`` becomes its
#: total. With no system marker left, ``sb`` goes. A removal that empties
#: the conversation deletes every key but ``ids`` (then holding only the
#: evicted-id record's marks) and ``evicted``, as a window that empties it
#: does, and slides their TTL; its receipt stays in ``removals``.
REMOVE = (
    _EXPIRE
    + _CHUNKS
    + _CURRENT_SYSTEM
    + _RECORD
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local info = KEYS[8]
local conversation = {meta, msgs, turns, system, ids, KEYS[6], info}
local receipts = KEYS[7]
local head = ARGV[1]
local c1 = string.find(head, ':', 1, true)
local c2 = string.find(head, ':', c1 + 1, true)
local c3 = string.find(head, ':', c2 + 1, true)
local c4 = string.find(head, ':', c3 + 1, true)
local newest = string.sub(head, 1, c1 - 1) == 'n'
local ttl = tonumber(string.sub(head, c1 + 1, c2 - 1))
local kept = tonumber(string.sub(head, c2 + 1, c3 - 1))
local lifetime = string.sub(head, c3 + 1, c4 - 1)
local token = string.sub(head, c4 + 1)

-- sent again: the first run's answer, and nothing else
local receipt = redis.call('HMGET', receipts, token, '#')
if receipt[1] then
  local packed, reply, at = receipt[1], {}, 1
  while at <= #packed do
    local colon = string.find(packed, ':', at, true)
    local size = tonumber(string.sub(packed, at, colon - 1))
    reply[#reply + 1] = string.sub(packed, colon + 1, colon + size)
    at = colon + size + 1
  end
  reply[#reply + 1] = ''
  return reply
end

-- the record moves, last before the expiry
local op = ''
local function record_moves()
  local v, u, owner, id = record_write(info, true)
  op = publish(9, v, u, owner, id)
end

-- the receipt of this removal: the oldest one leaves the ring for it; the
-- index update of the record's move ends the reply
local function answer(reply)
  local parts = {}
  for k, body in ipairs(reply) do
    parts[2 * k - 1] = string.format('%d:', #body)
    parts[2 * k] = body
  end
  local count = tonumber(receipt[2] or '0') + 1
  local slot = string.format('@%d', count % kept)
  local oldest = redis.call('HGET', receipts, slot)
  if oldest then redis.call('HDEL', receipts, oldest) end
  redis.call('HSET', receipts, token, table.concat(parts), slot, token,
    '#', string.format('%d', count))
  redis.call('PEXPIRE', receipts, lifetime)
  reply[#reply + 1] = op
  return reply
end

local state = redis.call('HMGET', meta, 'next', 'ctr', 'tsize', 'ssize', 'exp', 'sb')
if state[1] == false then return {''} end

local function turn_row(entry)
  local size, seq, id = string.match(entry, '^%a:(%d+):(%d+):(.*)$')
  return {seq = tonumber(seq), id = id, size = tonumber(size), marker = entry}
end

local function system_row(entry)
  local size, seq, idlen, rest = string.match(entry, '^(%d+):(%d+):(%d+):(.*)$')
  return {seq = tonumber(seq), id = string.sub(rest, 1, tonumber(idlen)),
    size = tonumber(size), marker = entry, system = true}
end

-- the row of the marker numbered seq, taken out of list; nil if none is
local function take(list, seq, row_of)
  local length = redis.call('LLEN', list)
  local low, high = 0, length - 1
  while low <= high do
    local middle = math.floor((low + high) / 2)
    local row = row_of(redis.call('LINDEX', list, middle))
    if row.seq == seq then
      local from = 1
      if middle >= length / 2 then from = -1 end
      redis.call('LREM', list, from, row.marker)
      return row
    end
    if row.seq < seq then low = middle + 1 else high = middle - 1 end
  end
  return nil
end

local doomed = {}
if newest then
  local count = tonumber(ARGV[2])
  local t = redis.call('LRANGE', turns, -count, -1)
  local s = redis.call('LRANGE', system, -count, -1)
  local i, j, tr, sr = #t, #s, nil, nil
  if i > 0 then tr = turn_row(t[i]) end
  if j > 0 then sr = system_row(s[j]) end
  while #doomed < count and (tr or sr) do
    if sr == nil or (tr ~= nil and tr.seq > sr.seq) then
      doomed[#doomed + 1] = tr
      i = i - 1
      tr = nil
      if i > 0 then tr = turn_row(t[i]) end
    else
      doomed[#doomed + 1] = sr
      j = j - 1
      sr = nil
      if j > 0 then sr = system_row(s[j]) end
    end
  end
  if i < #t then redis.call('LTRIM', turns, 0, i - #t - 1) end
  if j < #s then redis.call('LTRIM', system, 0, j - #s - 1) end
else
  local named = {}
  for k = 2, #ARGV do named[#named + 1] = ARGV[k] end
  for k, value in ipairs(hmget_all(ids, named)) do
    if value and value ~= '' then
      local seq = tonumber(value)
      local row = take(system, seq, system_row) or take(turns, seq, turn_row)
      -- without a marker (a layout this release never writes) the message
      -- and its id go all the same
      doomed[#doomed + 1] = row or {seq = seq, id = named[k]}
    end
  end
end
if #doomed == 0 then return {''} end
table.sort(doomed, function(a, b) return a.seq < b.seq end)

local seqs, gone = {}, {}
for k, row in ipairs(doomed) do
  seqs[k] = string.format('%d', row.seq)
  gone[k] = row.id
end
local bodies = hmget_all(msgs, seqs)
hdel_all(msgs, seqs)
hdel_all(ids, gone)
local reply = {}
for k = 1, #seqs do
  if bodies[k] then reply[#reply + 1] = bodies[k] end
end

local expiring = state[5] ~= '0'
if redis.call('HLEN', msgs) == 0 then
  redis.call('DEL', meta, msgs, turns, system)
  record_moves()
  expire({ids, KEYS[6], info}, ttl, expiring)
  return answer(reply)
end

-- the totals, and rule 1 over what is left
local weighed = state[2] ~= '' and state[2] ~= false
local batch = tonumber(state[6] or '0')
local tsize, ssize = tonumber(state[3] or '0'), tonumber(state[4] or '0')
local set_lost = false
for _, row in ipairs(doomed) do
  if row.marker then
    local weight = 1
    if weighed then weight = row.size end
    if not row.system then
      tsize = tsize - weight
    elseif row.seq >= batch then
      ssize = ssize - weight
      set_lost = true
    end
  end
end
local moved, cleared = nil, false
if set_lost then
  local last = redis.call('LINDEX', system, -1)
  if not last then
    cleared = true
    ssize = 0
  elseif tonumber(string.match(last, '^%d+:(%d+):')) < batch then
    moved = tonumber(string.match(last, '\\n(%d+)$') or '0')
    ssize = 0
    for _, entry in ipairs(current_system(system, moved)) do
      if weighed then ssize = ssize + tonumber(string.match(entry, '^(%d+):'))
      else ssize = ssize + 1 end
    end
    batch = moved
  end
end
if not weighed and state[5] == false then
  tsize = redis.call('LLEN', turns)
  if not moved then ssize = #current_system(system, batch) end
end
local flag = '0'
if ttl > 0 then flag = '1' end
local fields = {'tsize', string.format('%d', tsize),
  'ssize', string.format('%d', ssize), 'ver', token, 'exp', flag}
if moved then
  fields[#fields + 1] = 'sb'
  fields[#fields + 1] = string.format('%d', moved)
end
redis.call('HSET', meta, unpack(fields))
if cleared then redis.call('HDEL', meta, 'sb') end
record_moves()
expire(conversation, ttl, expiring)
return answer(reply)
"""
)

#: Replace a conversation (``save_all``).
#:
#: KEYS: meta, msgs, turns, system, ids, evicted (the record is cleared).
#: ARGV: ttl ms (0 = none), write token, n, then n times: id, role code,
#: canonical text (system messages only), codec JSON. Sizes are unknown here
#: (no window), so every marker weighs 1 and ``ctr`` is ``""``. The keys are
#: new after the ``UNLINK``, so without a TTL there is nothing to persist;
#: the messages are one batch, numbered 0, so ``sb`` is left out.
SAVE = (
    _EXPIRE
    + _RECORD
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local info = KEYS[7]
redis.call('UNLINK', meta, msgs, turns, system, ids, KEYS[6])
local n = tonumber(ARGV[3])
if n == 0 then
  -- the record goes with the messages
  local held = redis.call('HGET', info, 'v')
  if not held then return {0, ''} end
  redis.call('UNLINK', info)
  return {0, publish(8, math.max(now_us(), tonumber(held) + 1), false)}
end
local tsize, ssize = 0, 0
for i = 0, n - 1 do
  local base = 4 + i * 4
  local id, role = ARGV[base], ARGV[base + 1]
  local seq = string.format('%d', i)
  redis.call('HSET', msgs, seq, ARGV[base + 3])
  redis.call('HSET', ids, id, seq)
  if role == 's' then
    local entry = '1:' .. seq .. ':' .. string.len(id) .. ':' .. id .. ARGV[base + 2]
    redis.call('RPUSH', system, entry)
    ssize = ssize + 1
  else
    redis.call('RPUSH', turns, role .. ':1:' .. seq .. ':' .. id)
    tsize = tsize + 1
  end
end
local ttl = tonumber(ARGV[1])
local flag = '0'
if ttl > 0 then flag = '1' end
redis.call('HSET', meta, 'next', string.format('%d', n), 'ctr', '',
  'tsize', string.format('%d', tsize), 'ssize', string.format('%d', ssize),
  'ver', ARGV[2], 'exp', flag)
expire({meta, msgs, turns, system, ids}, ttl, false)
-- the record stays (owner, metadata, created_at) and moves
local v, u, owner, id = record_write(info, true)
expire({info}, ttl, ttl == 0)
return {n, publish(8, v, u, owner, id)}
"""
)

#: Rewrite the markers with sizes from another counter, unless a write came first.
#:
#: KEYS: meta, turns, system.
#: ARGV: counter id, the write token the sizes were measured at, tsize, ssize,
#: number of turn markers, the turn markers, then the system markers.
#: Returns 1 when done, 0 when the conversation changed meanwhile.
RESIZE = """
local meta, turns, system = KEYS[1], KEYS[2], KEYS[3]
if redis.call('HGET', meta, 'ver') ~= ARGV[2] then return 0 end
local pttl = redis.call('PTTL', meta)
redis.call('DEL', turns, system)
local nturns = tonumber(ARGV[5])
for i = 6, 5 + nturns do redis.call('RPUSH', turns, ARGV[i]) end
for i = 6 + nturns, #ARGV do redis.call('RPUSH', system, ARGV[i]) end
redis.call('HSET', meta, 'ctr', ARGV[1], 'tsize', ARGV[3], 'ssize', ARGV[4])
redis.call('HDEL', meta, 'sized')
if pttl > 0 then
  redis.call('PEXPIRE', turns, pttl)
  redis.call('PEXPIRE', system, pttl)
end
return 1
"""

# The newest rows of a log below a sequence number, read by number: every
# non-system message from the head of the turns list on is stored (a window
# evicts the oldest only), so a range of numbers down to that head holds
# them all, and only system messages (a view skips them) or holes a window
# left by replacing them. tail_range gives the numbers to read, from top
# down, and appends the lowest of them and the head's to the reply;
# tail_markers appends the markers of the rows just older than marker (the
# newest ones when it is ''), which hold their sizes.
_TAIL_ROWS = """
local function tail_range(reply, turns, top, rows)
  local low = top + 1
  local head = redis.call('LINDEX', turns, 0)
  if head then low = tonumber(string.match(head, '^%a:%d+:(%d+):')) end
  local start = math.max(low, top - rows + 1)
  reply[#reply + 1] = start
  reply[#reply + 1] = low
  local seqs = {}
  for seq = top, start, -1 do seqs[#seqs + 1] = string.format('%d', seq) end
  return seqs
end

local function tail_markers(reply, turns, rows, marker)
  local markers = {}
  if marker == '' then
    markers = redis.call('LRANGE', turns, -rows, -1)
  else
    local at = redis.call('LPOS', turns, marker, 'RANK', -1)
    if at and at > 0 then
      markers = redis.call('LRANGE', turns, math.max(0, at - rows), at - 1)
    end
  end
  for _, entry in ipairs(markers) do reply[#reply + 1] = entry end
end
"""

#: The first read of a window view: the current system set and the newest rows.
#:
#: KEYS: meta, msgs, turns, system.
#: ARGV[1]: how many sequence numbers to read down from the newest;
#: ARGV[2]: the window's counter id (``""`` for none).
#: Returns ``[]`` for no conversation, else ``ctr``, ``sized`` (``""`` when
#: absent), the number of system rows shown, the newest sequence number,
#: then ``<size>:<seq>`` of each system message the view shows (rule 1:
#: ``current_system``) and their messages, then the lowest number read and
#: the head's (see ``tail_range``), the messages read, newest first (false
#: for a hole), then, when ``ctr`` is the window's counter, the newest
#: markers (oldest first), which hold the rows' stored sizes. The messages
#: come from one ``HMGET`` (per 256).
VIEW = (
    _CHUNKS
    + _CURRENT_SYSTEM
    + _TAIL_ROWS
    + """
local meta, msgs, turns, system = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local state = redis.call('HMGET', meta, 'next', 'ctr', 'sized', 'sb')
if state[1] == false then return {} end
local top = tonumber(state[1]) - 1
local rows = tonumber(ARGV[1])
local shown = current_system(system, tonumber(state[4] or '0'))
local reply = {state[2], state[3] or '', #shown, top}
local seqs = {}
for i, entry in ipairs(shown) do
  local size, seq = string.match(entry, '^(%d+):(%d+):')
  reply[#reply + 1] = size .. ':' .. seq
  seqs[i] = seq
end
local bounds = {}
-- counted, not #reply + 1: the length operator searches the table each time
local n = #seqs
for _, seq in ipairs(tail_range(bounds, turns, top, rows)) do
  n = n + 1
  seqs[n] = seq
end
local bodies = hmget_all(msgs, seqs)
n = #reply
for i = 1, #shown do n = n + 1; reply[n] = bodies[i] end
reply[n + 1], reply[n + 2] = bounds[1], bounds[2]
n = n + 2
for i = #shown + 1, #seqs do n = n + 1; reply[n] = bodies[i] end
if ARGV[2] ~= '' and ARGV[2] == state[2] then tail_markers(reply, turns, rows, '') end
return reply
"""
)

#: A further read of a window view: the rows below those read so far.
#:
#: KEYS: meta, msgs, turns.
#: ARGV[1]: the lowest sequence number read so far; ARGV[2]: how many
#: numbers to read below it; ARGV[3]: the oldest marker read so far, whose
#: older neighbours hold the sizes, or ``""`` when no size is wanted;
#: ARGV[4] and ARGV[5]: ``ctr`` and ``sized`` as the first read saw them.
#: Returns the lowest number read and the head's (see ``tail_range``), the
#: messages read, newest first (false for a hole), then, when a marker was
#: given and the sizes are still those the first read took, the markers
#: just older than it, found with ``LPOS`` from the newest end (so the
#: search grows with the rows read and appended since, not with the log);
#: none when it is gone (a window append evicted it).
TAIL = (
    _CHUNKS
    + _TAIL_ROWS
    + """
local meta, msgs, turns = KEYS[1], KEYS[2], KEYS[3]
local rows = tonumber(ARGV[2])
local reply = {}
local bodies = hmget_all(msgs, tail_range(reply, turns, tonumber(ARGV[1]) - 1, rows))
local n = #reply
for i = 1, #bodies do reply[n + i] = bodies[i] end
if ARGV[3] ~= '' then
  -- another counter may have measured the rows since (then they are measured)
  local state = redis.call('HMGET', meta, 'ctr', 'sized')
  if state[1] == ARGV[4] and (state[2] or '') == ARGV[5] then
    tail_markers(reply, turns, rows, ARGV[3])
  end
end
return reply
"""
)

#: One page of the log by sequence number (``find_messages_page``).
#:
#: KEYS: meta, msgs, turns, system.
#: ARGV: ``n`` (newest first) or ``o`` (oldest first), the sequence number
#: the page starts after (``""`` for the first page), how many rows to read.
#: Returns the sequence number and the message of each row, in page order.
#:
#: Every non-system message from the head of the turns list on is stored
#: (a window evicts the oldest only), so from there the page reads a range
#: of sequence numbers, where only system messages a window replaced leave
#: holes; before it only system messages are left, each with its marker at
#: the head of the system list. So a page reads about as many rows as it
#: returns, however long the log is or whatever a window evicted.
PAGE = (
    _CHUNKS
    + """
local meta, msgs, turns, system = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local newest = ARGV[1] == 'n'
local want = tonumber(ARGV[3])
local stored = redis.call('HGET', meta, 'next')
if not stored then return {} end
local stop = tonumber(stored)
local low = stop
local first = redis.call('LINDEX', turns, 0)
if first then low = tonumber(string.match(first, '^%a:%d+:(%d+):')) end

local reply, found = {}, 0
local function take(seqs)
  local fields = {}
  for i, seq in ipairs(seqs) do fields[i] = string.format('%d', seq) end
  local bodies = hmget_all(msgs, fields)
  for i = 1, #fields do
    if bodies[i] then
      reply[#reply + 1] = fields[i]
      reply[#reply + 1] = bodies[i]
      found = found + 1
    end
  end
end

-- the sequence numbers of the system messages below bound, oldest first
local function system_below(bound)
  local seqs, start, step = {}, 0, 8
  while true do
    local part = redis.call('LRANGE', system, start, start + step - 1)
    for _, entry in ipairs(part) do
      local seq = tonumber(string.match(entry, '^%d+:(%d+):'))
      if seq >= bound then return seqs end
      seqs[#seqs + 1] = seq
    end
    if #part < step then return seqs end
    start = start + step
    if step < 1024 then step = step * 2 end
  end
end

if newest then
  local s = stop - 1
  if ARGV[2] ~= '' then s = math.min(s, tonumber(ARGV[2]) - 1) end
  while found < want and s >= low do
    local from = math.max(low, s - (want - found) + 1)
    local seqs = {}
    for seq = s, from, -1 do seqs[#seqs + 1] = seq end
    take(seqs)
    s = from - 1
  end
  if found < want and s >= 0 then
    local below = system_below(math.min(s + 1, low))
    local seqs = {}
    for i = #below, math.max(1, #below - (want - found) + 1), -1 do
      seqs[#seqs + 1] = below[i]
    end
    take(seqs)
  end
else
  local s = 0
  if ARGV[2] ~= '' then s = tonumber(ARGV[2]) + 1 end
  if s < low then
    local seqs = {}
    for _, seq in ipairs(system_below(low)) do
      if seq >= s and #seqs < want then seqs[#seqs + 1] = seq end
    end
    take(seqs)
    s = low
  end
  while found < want and s < stop do
    local to = math.min(stop - 1, s + (want - found) - 1)
    local seqs = {}
    for seq = s, to do seqs[#seqs + 1] = seq end
    take(seqs)
    s = to + 1
  end
end
return reply
"""
)


#: Set a conversation's owner or metadata (``set_conversation_info``).
#:
#: KEYS: meta, msgs, turns, system, ids, evicted, info, then on plain Redis
#: the index keys (:class:`~chatledger_redis.keys.IndexKeys`).
#: ARGV: ttl ms (0 = none); the owner's mode, ``k`` (keep), ``c`` (clear) or
#: ``s`` (set); the owner (``""`` unless set); the metadata's mode, ``k`` or
#: ``s``; the metadata's compact JSON text (``{}`` clears it).
#: Returns created_at and updated_at (ms), the owner and the metadata text
#: (nil for none), the message count, then the index update (``""`` when
#: the script made it). A new id gets a record without messages; updated_at
#: stays; every key of the conversation takes the TTL, as on any write.
SET_INFO = (
    _EXPIRE
    + _RECORD
    + """
local info = KEYS[7]
local ttl = tonumber(ARGV[1])
local owner = nil
if ARGV[2] == 'c' then owner = false elseif ARGV[2] == 's' then owner = ARGV[3] end
local expiring = redis.call('HGET', KEYS[1], 'exp') ~= '0'
local v, u, held, id = record_write(info, false, owner)
if ARGV[4] == 's' then
  if ARGV[5] == '{}' then
    redis.call('HDEL', info, 'm')
  else
    redis.call('HSET', info, 'm', ARGV[5])
  end
end
local op = publish(8, v, u, held, id)
expire({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], info}, ttl, expiring)
local record = redis.call('HMGET', info, 'c', 'u', 'o', 'm')
return {record[1], record[2], record[3], record[4], redis.call('HLEN', KEYS[2]), op}
"""
)

#: Delete a conversation, its receipts and its record (``delete_by_conversation_id``).
#:
#: KEYS: meta, msgs, turns, system, ids, evicted, removals, info, then on
#: plain Redis the index keys. Returns the index update (``""`` when the
#: script made it, or when there was no record).
DELETE = (
    _RECORD
    + """
local held = redis.call('HGET', KEYS[8], 'v')
redis.call('UNLINK', unpack(KEYS, 1, 8))
if not held then return '' end
return publish(9, math.max(now_us(), tonumber(held) + 1), false)
"""
)

#: Read one record (``get_conversation_info``, and each of a listing's).
#:
#: KEYS: info, msgs. Returns ``[]`` without a record, else created_at,
#: updated_at, the version, the owner and the metadata text (nil for none)
#: and the message count, read together.
INFO = """
local r = redis.call('HMGET', KEYS[1], 'c', 'u', 'v', 'o', 'm')
if not r[1] then return {} end
return {r[1], r[2], r[3], r[4], r[5], redis.call('HLEN', KEYS[2])}
"""

#: Bring the listing index up to a record write, or drop an entry whose
#: record is gone (Redis Cluster's follow-up of a write; a listing's repair
#: on either).
#:
#: KEYS: the index keys (:class:`~chatledger_redis.keys.IndexKeys`).
#: ARGV: the conversation id; ``w`` then a write's update as a script
#: answered it (``<version>:<updated_at ms>[:<owner>]``, or
#: ``<version>:-`` for a record gone), applied unless the index holds that
#: id at a version as new; or ``x`` then an updated_at (ms): the id's entries
#: go if the index still holds them at that time (a listing found no record
#: behind them; a newer write's entries stay).
#: Returns 1 when it changed the index, else 0.
INDEX = (
    _RECORD
    + """
local index, id = {KEYS[1], KEYS[2], KEYS[3]}, ARGV[1]
local held = redis.call('HGET', index[3], id)
if ARGV[2] == 'x' then
  if held and string.match(held, '^%d+:(%d+)') == ARGV[3] then
    index_drop(index, id, held)
    redis.call('HDEL', index[3], id)
    return 1
  end
  return 0
end
local v, rest = string.match(ARGV[3], '^(%d+):(.*)$')
v = tonumber(v)
if held and tonumber(string.match(held, '^(%d+):')) >= v then return 0 end
if rest == '-' then
  index_apply(index, id, v, false)
  return 1
end
local u, owner = string.match(rest, '^(%d+)(.*)$')
if owner == '' then owner = false else owner = string.sub(owner, 2) end
index_apply(index, id, v, tonumber(u), owner)
return 1
"""
)

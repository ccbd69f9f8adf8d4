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

A window append takes one argument per message, so the client packs few
arguments: ``<role code><size>\\n<id>\\n[<canonical text>\\n]<codec JSON>``
(the canonical text for system messages only). The separators are safe: a
message id is printable (no newline) and JSON text escapes every newline.

The append also keeps the evicted-id record (:mod:`chatledger.evicted_ids`):
every id it takes out of the window (evicted, a replaced system message, a
new message dropped at once) stays in the ``ids`` hash with an empty value
instead of being deleted, and is pushed on the ``evicted`` list. So the one
``HMGET`` that tells stored ids from fresh ones also finds an evicted id,
and a late retry is a no-op; the list keeps the order, and when it holds more
than the bound plus the step the client passes (core's ``EVICTED_IDS_KEPT``
and ``EVICTED_IDS_TRIM_STEP``), all but its newest ``EVICTED_IDS_KEPT`` ids
leave both the list and the hash: ``forget_oldest`` translates core's
``list_trim_count``, so a long conversation trims about once per step
evictions instead of spending two commands on every evicting append.
"""

from __future__ import annotations

__all__ = ["APPEND", "RESIZE", "SAVE"]

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

# Variadic writes in bounded chunks, and the evicted-id record's order.
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

local function forget_oldest(ids, record, length, keep, step)
  if length > keep + step then
    hdel_all(ids, redis.call('LPOP', record, length - keep))
  end
end
"""

#: Append a batch and trim the window (``SupportsWindowAppend``).
#:
#: KEYS: meta, msgs, turns, system, ids, evicted.
#: ARGV[1]: ``<limit>:<ttl ms, 0 = none>:<ids kept>:<trim step>:<write
#: token>:<counter id>`` (ids kept and trim step: the bound of the evicted-id
#: record and how far past it the record grows before a trim; the counter id,
#: ``""`` when every message weighs 1, comes last so it may hold any
#: character).
#: ARGV[2..]: one per message, see the module docstring.
#: Returns -1 when the stored sizes were measured by another counter (the
#: caller re-measures and retries), else a flat array: first the integer 1 when
#: every message of the batch was appended, otherwise the appended batch
#: indexes as one comma-separated string; then the evicted ids.
APPEND = (
    _EXPIRE
    + _CHUNKS
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local record = KEYS[6]
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
local n = #ARGV - 1

-- (a) a message whose id is stored already, or was evicted (then ids holds
-- it with an empty value), is a retry: skip it. One HMGET per 256 ids.
local batch_ids, bounds = {}, {}
for i = 1, n do
  local entry = ARGV[i + 1]
  local a = string.find(entry, '\\n', 1, true)
  local b = string.find(entry, '\\n', a + 1, true)
  batch_ids[i] = string.sub(entry, a + 1, b - 1)
  bounds[i] = {a, b}
end
local stored = {}
for i = 1, n, 256 do
  local found = redis.call('HMGET', ids, unpack(batch_ids, i, math.min(i + 255, n)))
  for j, value in ipairs(found) do stored[i + j - 1] = value end
end
local fresh = {}
local with_system = false
for i = 1, n do
  if stored[i] == false then
    local entry, a, b = ARGV[i + 1], bounds[i][1], bounds[i][2]
    local role = string.sub(entry, 1, 1)
    local m = {index = i - 1, role = role, size = tonumber(string.sub(entry, 2, a - 1)),
      id = batch_ids[i]}
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
if #fresh == 0 then return {''} end

-- hn: the write token of the last append that left the turns list
-- non-empty with a head that is not a tool response (every append leaves it
-- so, or empty). Every other write sets another ver, or drops meta, so only
-- hn == ver says the head needs no look
local state = redis.call('HMGET', meta, 'next', 'ctr', 'tsize', 'ssize', 'exp', 'ver',
  'hn')
local exists = state[1] ~= false
if counter ~= '' and exists and state[2] ~= counter then return -1 end
local weighed = counter ~= ''
local next_seq, tsize, ssize = 0, 0, 0
if exists then
  next_seq = tonumber(state[1])
  -- without a counter the stored sizes are marker counts, unless another
  -- counter measured them (or a write older than the exp field made them)
  if weighed or (state[2] == '' and state[5] ~= false) then
    tsize, ssize = tonumber(state[3]), tonumber(state[4])
  else
    tsize, ssize = redis.call('LLEN', turns), redis.call('LLEN', system)
  end
end
local settled_head = exists and state[7] == state[6]

-- (b) the system rule: an unknown system message replaces the stored ones;
-- the stored system markers are read only when the batch holds a system message
local known, stored_ids = {}, {}
if with_system then
  for i, entry in ipairs(redis.call('LRANGE', system, 0, -1)) do
    local _, seq, idlen, rest = string.match(entry, '^(%d+):(%d+):(%d+):(.*)$')
    idlen = tonumber(idlen)
    stored_ids[i] = {seq, string.sub(rest, 1, idlen)}
    known[string.sub(rest, idlen + 1)] = true
  end
end
local replace = false
for _, m in ipairs(fresh) do
  if m.role == 's' and not known[m.canon] then replace = true end
end
local evicted = {}
if replace then
  local seqs = {}
  for i, entry in ipairs(stored_ids) do
    seqs[i] = entry[1]
    evicted[i] = entry[2]
  end
  if #seqs > 0 then hdel_all(msgs, seqs) end
  redis.call('DEL', system)
  ssize = 0
  known = {}
end

-- (c) append what is left, with the next sequence numbers: one variadic
-- write per key; the ids marks wait for (d), which may add evicted ones
local appended = {}
local bodies, id_marks, turn_markers, system_markers = {}, {}, {}, {}
for _, m in ipairs(fresh) do
  local keep = true
  if m.role == 's' then
    if known[m.canon] then keep = false else known[m.canon] = true end
  end
  if keep then
    local id, size = m.id, m.size
    local seq = string.format('%d', next_seq)
    next_seq = next_seq + 1
    bodies[#bodies + 1] = seq
    bodies[#bodies + 1] = m.json
    id_marks[#id_marks + 1] = id
    id_marks[#id_marks + 1] = seq
    if m.role == 's' then
      system_markers[#system_markers + 1] =
        size .. ':' .. seq .. ':' .. string.len(id) .. ':' .. id .. m.canon
      ssize = ssize + size
    else
      turn_markers[#turn_markers + 1] = m.role .. ':' .. size .. ':' .. seq .. ':' .. id
      tsize = tsize + size
    end
    appended[#appended + 1] = m.index
  end
end
hset_pairs(msgs, bodies)
rpush_all(system, system_markers)
rpush_all(turns, turn_markers)

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

local first = 1
if #appended < n then first = table.concat(appended, ',') end
local reply = {first}
for i, id in ipairs(evicted) do reply[i + 1] = id end

-- (e) the ids marks in one write: appended ids map to their sequence
-- number, evicted ones (the evicted-id record) to an empty value, later
-- pairs winning as the script's order says; the record keeps the order and
-- its bound. An emptied conversation leaves only the record (ids then holds
-- its marks alone); otherwise slide the TTL
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
    expire({ids, record}, ttl, expiring)
    return reply
  end
end
local flag = '0'
if ttl > 0 then flag = '1' end
local next_text = string.format('%d', next_seq)
local hn = ''
if not emptied then hn = token end
redis.call('HSET', meta, 'next', next_text, 'ctr', counter,
  'tsize', string.format('%d', tsize), 'ssize', string.format('%d', ssize),
  'ver', token, 'exp', flag, 'hn', hn)
expire(KEYS, ttl, expiring)
return reply
"""
)

#: Replace a conversation (``save_all``).
#:
#: KEYS: meta, msgs, turns, system, ids, evicted (the record is cleared).
#: ARGV: ttl ms (0 = none), write token, n, then n times: id, role code,
#: canonical text (system messages only), codec JSON. Sizes are unknown here
#: (no window), so every marker weighs 1 and ``ctr`` is ``""``. The keys are
#: new after the ``UNLINK``, so without a TTL there is nothing to persist.
SAVE = (
    _EXPIRE
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
redis.call('UNLINK', meta, msgs, turns, system, ids, KEYS[6])
local n = tonumber(ARGV[3])
if n == 0 then return 0 end
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
return n
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
if pttl > 0 then
  redis.call('PEXPIRE', turns, pttl)
  redis.call('PEXPIRE', system, pttl)
end
return 1
"""

"""The Lua scripts that make every write one atomic step on the server.

Example:
    from chatledger_redis.scripts import APPEND

    script = client.register_script(APPEND)   # EVALSHA, reloaded on NOSCRIPT
    script(keys=keys.all(), args=[...])

Each script receives every key it touches in ``KEYS`` (one hash slot, see
:mod:`chatledger_redis.keys`) and runs alone on the server, so no other
command sees a half-written conversation. Each one writes one entry per
``redis.call`` instead of ``unpack``-ing a batch, so a batch of any length stays
clear of Lua's stack limit. Every write ends by giving all five keys the same
absolute expiry (``PEXPIREAT`` from the server clock) or none (``PERSIST``),
so the keys of a conversation never drift apart.
"""

from __future__ import annotations

__all__ = ["APPEND", "RESIZE", "SAVE"]

# Shared tail: the sliding TTL of the whole conversation, in one place.
_EXPIRE = """
local function expire(keys, ttl)
  if ttl > 0 then
    local now = redis.call('TIME')
    local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
    local stamp = string.format('%d', at)
    for _, key in ipairs(keys) do redis.call('PEXPIREAT', key, stamp) end
  else
    for _, key in ipairs(keys) do redis.call('PERSIST', key) end
  end
end
"""

#: Append a batch and trim the window (``SupportsWindowAppend``).
#:
#: KEYS: meta, msgs, turns, system, ids.
#: ARGV: limit, counter id ("" = every message weighs 1), ttl ms (0 = none),
#: write token, n, then n times: id, role code, size, canonical text (system
#: messages only), codec JSON.
#: Returns -1 when the stored sizes were measured by another counter (the
#: caller re-measures and retries), else {appended batch indexes, evicted ids}.
APPEND = (
    _EXPIRE
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local limit = tonumber(ARGV[1])
local counter = ARGV[2]
local n = tonumber(ARGV[5])

-- (a) a message whose id is stored already is a retry: skip it
local fresh = {}
for i = 0, n - 1 do
  local base = 6 + i * 5
  if redis.call('HEXISTS', ids, ARGV[base]) == 0 then fresh[#fresh + 1] = base end
end
if #fresh == 0 then return {{}, {}} end

local state = redis.call('HMGET', meta, 'next', 'ctr', 'tsize', 'ssize')
local exists = state[1] ~= false
if counter ~= '' and exists and state[2] ~= counter then return -1 end
local next_seq, tsize, ssize = 0, 0, 0
if exists then
  next_seq, tsize, ssize = tonumber(state[1]), tonumber(state[3]), tonumber(state[4])
end

-- (b) the system rule: an unknown system message replaces the stored ones;
-- the stored system markers are read only when the batch holds a system message
local with_system = false
for _, base in ipairs(fresh) do
  if ARGV[base + 1] == 's' then with_system = true end
end
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
for _, base in ipairs(fresh) do
  if ARGV[base + 1] == 's' and not known[ARGV[base + 3]] then replace = true end
end
local evicted = {}
if replace then
  for _, entry in ipairs(stored_ids) do
    redis.call('HDEL', msgs, entry[1])
    redis.call('HDEL', ids, entry[2])
    evicted[#evicted + 1] = entry[2]
  end
  redis.call('DEL', system)
  ssize = 0
  known = {}
end

-- (c) append what is left, with the next sequence numbers
local appended = {}
for _, base in ipairs(fresh) do
  local role, canon = ARGV[base + 1], ARGV[base + 3]
  local keep = true
  if role == 's' then
    if known[canon] then keep = false else known[canon] = true end
  end
  if keep then
    local id, size = ARGV[base], ARGV[base + 2]
    local seq = string.format('%d', next_seq)
    next_seq = next_seq + 1
    redis.call('HSET', msgs, seq, ARGV[base + 4])
    redis.call('HSET', ids, id, seq)
    if role == 's' then
      local entry = size .. ':' .. seq .. ':' .. string.len(id) .. ':' .. id .. canon
      redis.call('RPUSH', system, entry)
      ssize = ssize + tonumber(size)
    else
      redis.call('RPUSH', turns, role .. ':' .. size .. ':' .. seq .. ':' .. id)
      tsize = tsize + tonumber(size)
    end
    appended[#appended + 1] = (base - 6) / 5
  end
end

-- (d) count_evictions, streaming the oldest markers only while it must
local weighed = counter ~= ''
local excess
if weighed then
  excess = ssize + tsize - limit
else
  excess = redis.call('LLEN', system) + redis.call('LLEN', turns) - limit
end
if excess > 0 then
  local dropped, last_user, count, index, cut = 0, -1, 0, 0, -1
  local read, start, step = {}, 0, 8
  while cut < 0 do
    local part = redis.call('LRANGE', turns, start, start + step - 1)
    if #part == 0 then break end
    for _, entry in ipairs(part) do
      local role, size, seq, id = string.match(entry, '^(%a):(%d+):(%d+):(.*)$')
      size = tonumber(size)
      read[index + 1] = {seq, id, size}
      count = index + 1
      if dropped >= excess then
        if role == 'u' then cut = index break end
      else
        if role == 'u' then last_user = index end
        if weighed then dropped = dropped + size else dropped = dropped + 1 end
      end
      index = index + 1
    end
    start = start + #part
    if step < 1024 then step = step * 2 end
  end
  if cut < 0 then
    if last_user < 0 then cut = count else cut = last_user end
  end
  for i = 1, cut do
    redis.call('HDEL', msgs, read[i][1])
    redis.call('HDEL', ids, read[i][2])
    evicted[#evicted + 1] = read[i][2]
    tsize = tsize - read[i][3]
  end
  if cut > 0 then redis.call('LTRIM', turns, cut, -1) end
end

-- (e) an emptied conversation leaves no key; otherwise slide the TTL
if redis.call('HLEN', msgs) == 0 then
  redis.call('DEL', meta, msgs, turns, system, ids)
  return {appended, evicted}
end
redis.call('HSET', meta, 'next', string.format('%d', next_seq), 'ctr', counter,
  'tsize', string.format('%d', tsize), 'ssize', string.format('%d', ssize),
  'ver', ARGV[4])
expire(KEYS, tonumber(ARGV[3]))
return {appended, evicted}
"""
)

#: Replace a conversation (``save_all``).
#:
#: KEYS: meta, msgs, turns, system, ids.
#: ARGV: ttl ms (0 = none), write token, n, then n times: id, role code,
#: canonical text (system messages only), codec JSON. Sizes are unknown here
#: (no window), so every marker weighs 1 and ``ctr`` is ``""``.
SAVE = (
    _EXPIRE
    + """
local meta, msgs, turns, system, ids = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
redis.call('UNLINK', meta, msgs, turns, system, ids)
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
redis.call('HSET', meta, 'next', string.format('%d', n), 'ctr', '',
  'tsize', string.format('%d', tsize), 'ssize', string.format('%d', ssize),
  'ver', ARGV[2])
expire(KEYS, tonumber(ARGV[1]))
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

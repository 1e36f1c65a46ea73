-- index: KEYS[1] is a workspace's index of reserved records, a sorted set
-- of record members scored by expiry (ms).
-- ARGV = op ('add', 'drop', 'rem' or 'page'), then for add: member, TTL ms
-- of the record from now; for drop: member, the score the caller read; for
-- rem: member (its record just became final); for page: score and member
-- of the last entry read ('-inf' and '' at first), count.
-- add raises an entry's score to the record's expiry, never lowers it, and
-- prunes entries that expired; the set lives as long as its newest entry.
-- drop removes an entry only if its score is still the one read, so that a
-- record made again since then keeps its entry.
-- page returns up to count entries (member, score, ...) after the one
-- named, in (score, member) order: the order of the set, so ties of score
-- are paged too. It writes nothing.
-- It runs alone (without common.lua): an add rides with every claim.
local key = KEYS[1]
if ARGV[1] == 'page' then
  local from, after, count = ARGV[2], ARGV[3], tonumber(ARGV[4])
  local fromn = tonumber(from)
  local out, off = {}, 0
  while #out < 2 * count do
    local b = redis.call('ZRANGE', key, from, '+inf', 'BYSCORE', 'LIMIT', off, 2 * count, 'WITHSCORES')
    if #b == 0 then
      break
    end
    for i = 1, #b, 2 do
      if #out < 2 * count and not (tonumber(b[i + 1]) == fromn and b[i] <= after) then
        out[#out + 1] = b[i]
        out[#out + 1] = b[i + 1]
      end
    end
    off = off + #b / 2
  end
  return out
end
if ARGV[1] == 'rem' then
  redis.call('ZREM', key, ARGV[2])
  return {'ok'}
end
if ARGV[1] == 'add' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ttl = tonumber(ARGV[3])
  redis.call('ZADD', key, 'GT', string.format('%d', now + ttl), ARGV[2])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%d', now))
  if redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
  return {'ok'}
end
local cur = redis.call('ZSCORE', key, ARGV[2])
if cur and tonumber(cur) == tonumber(ARGV[3]) then
  redis.call('ZREM', key, ARGV[2])
end
return {'ok'}

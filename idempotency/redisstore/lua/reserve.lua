-- reserve: ARGV = token, op tag, lease ms, retention ms.
local token, op = tonumber(ARGV[1]), ARGV[2]
local lease, retention = tonumber(ARGV[3]), tonumber(ARGV[4])

if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
local r = redis.call('HMGET', key, 'm', 'n', 'y', 'l', 'o')
local s, n, cy, l, rop = string.sub(r[1] or '', 1, 1), tonumber(r[2]) or 0, tonumber(r[3]) or 0, tonumber(r[4]) or 0, r[5]

if rop == op then
  touch(retention)
  return {'reserved', n, l, 1}
end
if s ~= 'f' or n ~= token then
  return {'stale'}
end
if cy >= 2 then
  return {'cycle_exhausted'}
end
-- A lease that ran out already reads as unknown; it is not extended.
local now = now_ms()
if l <= now then
  return {'lease_expired'}
end
local nl = now + lease
redis.call('HSET', key, 'n', int(n + 1), 'y', int(cy + 1), 'l', int(nl), 'U', int(now), 'o', op)
touch(retention)
return {'reserved', n + 1, nl}

-- reserve: ARGV = token, op tag, lease ms, unknown retention ms, attempt
-- timeout ms, previous never sent ('1': attempt token is taken back). Replies {reserved, token, lease deadline, attempt deadline}
-- and a fifth element 1 when the op was applied before.
local token, op = tonumber(ARGV[1]), ARGV[2]
local lease, uretention, timeout = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
local r = redis.call('HMGET', key, 'm', 'n', 'y', 'l', 'o', 's', 'e')
local s, n, cy, l, rop = string.sub(r[1] or '', 1, 1), tonumber(r[2]) or 0, tonumber(r[3]) or 0, tonumber(r[4]) or 0, r[5]
local sent, e = tonumber(r[6]) or n, tonumber(r[7]) or 0

if rop == op then
  touch(uretention)
  return {'reserved', n, l, e, 1}
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
local nl, ne = now + lease, now + timeout
redis.call('HSET', key, 'n', int(n + 1), 'y', int(cy + 1), 'l', int(nl), 'e', int(ne), 'U', int(now), 'o', op)
redis.call('HDEL', key, 'O')
if ARGV[6] == '1' then
  put_sent(n + 1, sent) -- the previous attempt never left; this one may
else
  put_sent(n + 1, sent + 1)
end
touch(uretention)
return {'reserved', n + 1, nl, ne}

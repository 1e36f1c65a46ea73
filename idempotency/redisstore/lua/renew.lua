-- renew: ARGV = token, op tag, lease ms. A compare-and-set on state
-- in_flight, the token and a live lease: it never revives a lapsed lease.
-- The lease becomes min(now + lease, attempt deadline), and never shrinks.
-- Its op tag has a field of its own (O), so that renewals never hide a
-- re-sent claim or reserve. Not WAITed: a lost renewal only shortens a lease.
local token, op, lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])

if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
local r = redis.call('HMGET', key, 'm', 'n', 'l', 'e', 'O')
local s, n, l, e, rop = string.sub(r[1] or '', 1, 1), tonumber(r[2]) or 0, tonumber(r[3]) or 0, tonumber(r[4]), r[5]

if s ~= 'f' or n ~= token then
  return {'stale'}
end
local now = now_ms()
if l <= now then
  return {'lease_expired'}
end
-- A re-sent renewal answers the lease it set, while that lease lives.
if rop == op then
  return {'renewed', l, 1}
end
local nl = now + lease
if e ~= nil and nl > e then
  nl = e -- a record made before attempt deadlines has none
end
if nl > l then
  redis.call('HSET', key, 'l', int(nl), 'O', op)
else
  nl = l
  redis.call('HSET', key, 'O', op)
end
return {'renewed', nl}

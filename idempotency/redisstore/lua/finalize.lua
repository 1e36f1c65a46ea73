-- finalize: ARGV = token, state (a, r, u), op tag, TTL ms, never sent
-- (0/1), status ('' if none), body dropped (0/1), body, then header
-- field/value pairs.
-- The token is the fence: an in_flight record whose lease expired, but that
-- no claim took over, still accepts its own attempt's outcome, and so does
-- one that the lease-expiry path turned unknown (no F) without a new token.
-- Never sent takes the attempt back only from an in_flight record.
local token, state, op = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local ttl, never = tonumber(ARGV[4]), ARGV[5] == '1'

if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
local r = redis.call('HMGET', key, 'm', 'n', 'o', 'C', 's', 'F')
local m, n, rop, created = r[1] or '', tonumber(r[2]) or 0, r[3], tonumber(r[4]) or 0
local sent, settled = tonumber(r[5]) or n, r[6] ~= false and r[6] ~= nil
local s = string.sub(m, 1, 1)

if rop == op then
  return {'finalized', record(false), 1}
end
if n ~= token or not (s == 'f' or (s == 'u' and not settled)) then
  return {'stale'}
end
local now = now_ms()
clear_result()
redis.call('HDEL', key, 'l', 'y', 'e', 'O', 'U')
local set = {'m', with_state(m, state), 'F', int(now - created), 'o', op}
if ARGV[6] ~= '' then
  set[#set + 1] = 'x'
  set[#set + 1] = ARGV[6]
end
if ARGV[7] == '1' then
  set[#set + 1] = 'D'
  set[#set + 1] = '1'
end
if ARGV[8] ~= '' then
  set[#set + 1] = 'B'
  set[#set + 1] = ARGV[8]
end
for i = 9, #ARGV do
  set[#set + 1] = ARGV[i]
end
redis.call('HSET', key, unpack(set))
if never and s == 'f' and sent > 0 then
  put_sent(n, sent - 1)
end
touch(ttl)
return {'finalized', record(false)}

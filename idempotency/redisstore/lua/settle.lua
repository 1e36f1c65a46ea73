-- settle: ARGV = attempts the operator saw, state (a, r), op tag, retention
-- ms, who, note, status ('' if none), body dropped (0/1), body, then header
-- field/value pairs.
-- Only an unknown record, or an in_flight one whose lease lapsed, is
-- settled, and only while its attempt count is the one the operator saw.
-- The resolution goes to field R: who, time (ms), note, joined by 0x1f
-- (validated text holds no control byte). F is set, so a late finalize of
-- the attempt that went unknown is stale. The TTL never shrinks.
local attempts, state, op, retention = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])

if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
local r = redis.call('HMGET', key, 'm', 'n', 'o', 'C', 'l')
local m, n, rop, created, l = r[1] or '', tonumber(r[2]) or 0, r[3], tonumber(r[4]) or 0, tonumber(r[5]) or 0
local s = string.sub(m, 1, 1)

if rop == op then
  return {'settled', record(false), 1}
end
local now = now_ms()
if not (s == 'u' or (s == 'f' and l <= now)) then
  return {'not_unknown'}
end
if n ~= attempts then
  return {'stale'}
end
clear_result()
redis.call('HDEL', key, 'l', 'y', 'e', 'O', 'U')
local set = {'m', with_state(m, state), 'F', int(now - created), 'o', op,
  'R', ARGV[5] .. '\31' .. int(now) .. '\31' .. ARGV[6]}
if ARGV[7] ~= '' then
  set[#set + 1] = 'x'
  set[#set + 1] = ARGV[7]
end
if ARGV[8] == '1' then
  set[#set + 1] = 'D'
  set[#set + 1] = '1'
end
if ARGV[9] ~= '' then
  set[#set + 1] = 'B'
  set[#set + 1] = ARGV[9]
end
for i = 10, #ARGV do
  set[#set + 1] = ARGV[i]
end
redis.call('HSET', key, unpack(set))
local ttl = redis.call('PTTL', key)
if ttl >= 0 and ttl < retention then
  touch(retention)
end
return {'settled', record(false)}

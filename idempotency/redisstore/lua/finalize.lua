-- finalize: ARGV = token, state (a, r, u), op tag, retention ms, status (''
-- if none), body dropped (0/1), body, then header field/value pairs.
-- The token is the fence: an in_flight record whose lease expired, but that
-- no claim took over, still accepts its own attempt's outcome.
local token, state, op = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local retention = tonumber(ARGV[4])

if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
local r = redis.call('HMGET', key, 'm', 'n', 'o', 'C')
local m, n, rop, created = r[1] or '', tonumber(r[2]) or 0, r[3], tonumber(r[4]) or 0

if rop == op then
  return {'finalized', record(false), 1}
end
if string.sub(m, 1, 1) ~= 'f' or n ~= token then
  return {'stale'}
end
local now = now_ms()
clear_result()
redis.call('HDEL', key, 'l', 'y', 'U')
local set = {'m', with_state(m, state), 'F', int(now - created), 'o', op}
if ARGV[5] ~= '' then
  set[#set + 1] = 'x'
  set[#set + 1] = ARGV[5]
end
if ARGV[6] == '1' then
  set[#set + 1] = 'D'
  set[#set + 1] = '1'
end
if ARGV[7] ~= '' then
  set[#set + 1] = 'B'
  set[#set + 1] = ARGV[7]
end
for i = 8, #ARGV do
  set[#set + 1] = ARGV[i]
end
redis.call('HSET', key, unpack(set))
touch(retention)
return {'finalized', record(false)}

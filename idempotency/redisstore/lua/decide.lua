-- decide: ARGV = ticket, approve (0/1), op tag, retention ms.
-- The first decision is final: repeating it answers it again, contradicting
-- it answers the decision that stands.
local ticket, approve, op = ARGV[1], ARGV[2] == '1', ARGV[3]
local retention = tonumber(ARGV[4])

if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
local r = redis.call('HMGET', key, 't', 'm', 'a', 'o')
local t, m, ap, rop = r[1], r[2] or '', r[3], r[4]
local s = string.sub(m, 1, 1)
if t ~= ticket then
  return {'not_found'}
end

local standing
if s == 'd' then
  standing = 'denied'
elseif ap == '1' then
  standing = 'approved'
end
if rop == op and standing then
  return {standing, 1}
end
if standing then
  if (standing == 'approved') == approve then
    return {standing}
  end
  return {'conflict', standing}
end
if s ~= 'h' then
  return redis.error_reply('ERR redisstore: ticketed record is neither held nor decided')
end
local now = now_ms()
if approve then
  redis.call('HSET', key, 'a', '1', 'U', int(now), 'o', op)
else
  redis.call('HSET', key, 'm', with_state(m, 'd'), 'U', int(now), 'o', op)
end
touch(retention)
return {approve and 'approved' or 'denied'}

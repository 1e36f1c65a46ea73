-- decide: ARGV = ticket, approve (0/1), op id, retention ms.
-- The first decision is final: repeating it answers it again, contradicting
-- it answers the decision that stands.
local ticket, approve = ARGV[1], ARGV[2] == '1'
local op = 'd' .. ARGV[3]
local retention = tonumber(ARGV[4])

if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
local r = redis.call('HMGET', key, 't', 's', 'ap', 'op')
local t, s, ap, rop = r[1], r[2], r[3], r[4]
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
  redis.call('HSET', key, 'ap', '1', 'ua', int(now), 'op', op)
  touch(retention)
  return {'approved'}
end
redis.call('HSET', key, 's', 'd', 'ua', int(now), 'op', op)
touch(retention)
return {'denied'}

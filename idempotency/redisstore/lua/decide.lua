-- decide: ARGV = ticket, approve (0/1), op tag, retention ms, the record's
-- member in its unknown index bucket (KEYS[2]), the scope version (a record
-- of another is scope_version_conflict, as for a claim): a denial makes the record
-- final, so it removes the entry (a held record was never reserved, so it
-- has none; the ZREM keeps "a final record has no entry" in the script).
-- The first decision is final: repeating it answers it again, contradicting
-- it answers the decision that stands.
local ticket, approve, op = ARGV[1], ARGV[2] == '1', ARGV[3]
local retention = tonumber(ARGV[4])

local r = load()
if r == nil then
  return {'not_found'}
end
local t, m, ap, rop = r.t, r.m or '', r.a, r.o
local s = string.sub(m, 1, 1)
if t ~= ticket then
  return {'not_found'}
end
if r.w ~= ARGV[6] then
  return {'scope_version_conflict'}
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
  r.a = '1'
else
  r.m = with_state(m, 'd')
end
r.U, r.o = int(now), op
if not approve then
  index_rem(ARGV[5])
end
save(r, retention)
return {approve and 'approved' or 'denied'}

-- Implements docs/DESIGN.md 6a, "Quotas and headroom": the stored-bytes sum.
-- storedbytes: KEYS[1] is a workspace's stored-bytes counters (account.lua).
-- It sums the buckets that have not ended by Redis TIME and removes those
-- that have (their records are gone). No arguments
-- (internal/scriptargs.StoredBytes). Reply: {sum}.
-- It runs alone (without common.lua).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local sum = 0
for i = 1, #all, 2 do
  local ends = tonumber(all[i])
  if ends == nil or ends <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    sum = sum + (tonumber(all[i + 1]) or 0)
  end
end
return {sum}

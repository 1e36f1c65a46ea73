-- Implements docs/DESIGN.md 6a, "Quotas and headroom": the token bucket.
-- quota: KEYS[1] is a workspace's token bucket ({prefix}quota:{workspace}),
-- a hash of tok (the tokens left, a decimal) and ts (when tok was counted,
-- ms of Redis TIME). Arguments (internal/scriptargs.Quota): rate (tokens
-- per second, > 0), burst (the bucket's size, >= 1), n (tokens asked, >=
-- 1). A bucket that does not exist is full. The tokens earned since ts are
-- added (up to burst), then min(n, whole tokens) are taken. Reply:
-- {granted, retry_ms}: retry_ms is 0 when all n were granted, else the
-- time until the next whole token. The key lives until the bucket would
-- be full again (its absence means full), at least 1s, at most a year.
-- It runs alone (without common.lua).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('HMGET', KEYS[1], 'tok', 'ts')
local tok, ts = tonumber(v[1]), tonumber(v[2])
if tok == nil or ts == nil then
  tok, ts = burst, now
end
if now > ts then
  tok = math.min(burst, tok + (now - ts) * rate / 1000)
end
if tok > burst then
  tok = burst -- a smaller burst configured since
end
local granted = math.min(n, math.floor(tok))
if granted < 0 then
  granted = 0
end
tok = tok - granted
local retry = 0
if granted < n then
  retry = math.max(1, math.ceil((1 - (tok - math.floor(tok))) * 1000 / rate))
end
redis.call('HSET', KEYS[1], 'tok', string.format('%.17g', tok), 'ts', string.format('%d', now))
-- (At most a year: a slower bucket that expires reads full early.)
local full = math.min(math.ceil((burst - tok) * 1000 / rate), 31536000000)
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.max(1000, full)))
return {granted, retry}

-- Implements docs/DESIGN.md 6a, "Quotas and headroom": the stored-bytes counters.
-- account: KEYS[1] is a workspace's stored-bytes counters
-- ({prefix}qb:{workspace}), a hash whose fields are the end of an expiry
-- bucket (ms of Redis TIME: every record counted in it is gone by then)
-- and whose values are the bytes written into it. Arguments
-- (internal/scriptargs.Account): ttl (ms: the records' expiry from now),
-- width (ms: the buckets' width), bytes (what they store). The bytes are
-- added to the bucket that ends at the first multiple of width at or
-- after now + ttl; the key lives as long as its latest bucket.
-- It runs alone (without common.lua).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = math.ceil((now + ttl) / width) * width
redis.call('HINCRBY', KEYS[1], string.format('%d', ends), bytes)
local life = ends - now
if redis.call('PEXPIRE', KEYS[1], life, 'GT') == 0 then
  redis.call('PEXPIRE', KEYS[1], life, 'NX')
end
return {'accounted'}

-- Implements docs/DESIGN.md 6, "The record and its lifecycle": Reserve-next (lifecycle.Reserve).
-- reserve: arguments (internal/scriptargs.Reserve) token, op tag, lease
-- (ms), uretention unknown retention (ms), timeout attempt timeout (ms),
-- prev_never previous never sent (attempt token is taken back), member the
-- record's member in its unknown index bucket (KEYS[2]), which a
-- reservation adds, inc the caller's incarnation (another record's is
-- stale; '' and a record without one are not compared), maxatt the tool's
-- max_attempts: an attempt that would be one more than that to leave is
-- not reserved ({max_attempts}). The lease ends at the attempt deadline at
-- the latest. Replies {reserved, token, lease deadline, attempt
-- deadline} and a fifth element 1 when the op was applied before. The
-- attempt replaced keeps its deadline in E unless it never left.
local r = load()
if r == nil then
  return {'not_found'}
end
local s, n, cy, l, rop = string.sub(r.m or '', 1, 1), tonumber(r.n) or 0, tonumber(r.y) or 0, tonumber(r.l) or 0, r.o
local sent, e = tonumber(r.s) or n, tonumber(r.e) or 0

if inc ~= '' and r.i ~= nil and r.i ~= inc then
  return {'stale'} -- a record made again since this worker's claim
end
if rop == op then
  index_add(member, now_ms(), uretention, false)
  redis.call('PEXPIRE', key, uretention)
  return {'reserved', n, l, e, 1}
end
if s ~= 'f' or n ~= token then
  return {'stale'}
end
if cy >= 2 then
  return {'cycle_exhausted'}
end
-- A lease that ran out already reads as unknown; it is not extended.
local now = now_ms()
if l <= now then
  return {'lease_expired'}
end
if not prev_never and sent >= maxatt then
  return {'max_attempts'}
end
local nl, ne = now + lease, now + timeout
if nl > ne then
  nl = ne
end
if not prev_never and e > (tonumber(r.E) or 0) then
  r.E = int(e)
end
r.n, r.y, r.l, r.e, r.U, r.o, r.O, r.A = int(n + 1), int(cy + 1), int(nl), int(ne), int(now), op, nil, int(now)
if prev_never then
  put_sent(r, n + 1, sent) -- the previous attempt never left; this one may
  if sent <= 1 then
    r.W = int(now) -- the first attempt that may leave (common.lua)
  end
else
  put_sent(r, n + 1, sent + 1)
end
index_add(member, now, uretention, true)
save(r, uretention)
return {'reserved', n + 1, nl, ne}

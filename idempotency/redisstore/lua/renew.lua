-- Implements docs/DESIGN.md 6, "The record and its lifecycle", "Leases" (lifecycle.Renew).
-- renew: arguments (internal/scriptargs.Renew) token, op tag, lease (ms),
-- inc the caller's incarnation (another
-- record's answers not_found: the worker's record is gone, and this one is
-- not its to renew; '' and a record without one are not compared). A compare-and-set on state
-- in_progress, the token and a live lease: it never revives a lapsed lease.
-- The lease becomes min(now + lease, attempt deadline), and never shrinks.
-- Its op tag has a field of its own (O), so that renewals never hide a
-- re-sent claim or reserve. Not WAITed: a lost renewal only shortens a lease.
local r = load()
if r == nil or inc ~= '' and r.i ~= nil and r.i ~= inc then
  return {'not_found'}
end
local s, n, l, e, rop = string.sub(r.m or '', 1, 1), tonumber(r.n) or 0, tonumber(r.l) or 0, tonumber(r.e), r.O

if s ~= 'f' or n ~= token then
  return {'stale'}
end
local now = now_ms()
if l <= now then
  return {'lease_expired'}
end
-- A re-sent renewal answers the lease it set, while that lease lives.
if rop == op then
  return {'renewed', l, 1}
end
local nl = now + lease
if e ~= nil and nl > e then
  nl = e -- a record made before attempt deadlines has none
end
if nl > l then
  r.l = int(nl)
else
  nl = l
end
r.O = op
save(r, nil)
return {'renewed', nl}

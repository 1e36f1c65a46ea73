-- Implements docs/DESIGN.md 6, "The record and its lifecycle", "Resolving unknown" (lifecycle.Settle).
-- settle: arguments (internal/scriptargs.Settle) attempts the operator
-- saw, state (a, r), op tag, retention (ms), who, note, member the record's
-- member in its unknown index bucket (KEYS[2]), which a settle removes,
-- smargin the settle margin (ms: the store's lease), sv the scope version,
-- then the result (see set_result).
-- Only an unknown record, or an in_progress one whose lease lapsed, is
-- settled, only while its attempt count is the one the operator saw, and
-- only of the gateway's scope version. A record that still has an attempt
-- deadline (in flight, or turned unknown by the lease-expiry path), or the
-- deadline of an earlier attempt that may have left (E), may have that
-- attempt running at its gateway: until the later deadline plus the margin
-- the answer is {in_progress, settleable at (ms), now (ms)}.
-- The resolution goes to field R: who, time (ms), note, joined by 0x1f
-- (validated text holds no control byte). F is set, so a late finalize of
-- the attempt that went unknown is stale. The TTL never shrinks.
local r = load()
if r == nil then
  return {'not_found'}
end
local m, n, rop, created, l = r.m or '', tonumber(r.n) or 0, r.o, tonumber(r.C) or 0, tonumber(r.l) or 0
local s = string.sub(m, 1, 1)

if rop == op then
  return {'settled', encode(r, false), 1}
end
if r.w ~= sv then
  return {'scope_version_conflict'}
end
local now = now_ms()
if not (s == 'u' or (s == 'f' and l <= now)) then
  return {'not_unknown'}
end
if n ~= attempts then
  return {'stale'}
end
-- The later of the attempt's deadline and the earlier attempts' (E): a
-- redispatch replaced e, and a finalize cleared it, while an earlier
-- attempt may still be at the vendor.
local e = math.max(tonumber(r.e) or 0, tonumber(r.E) or 0)
if e > 0 and now <= e + smargin then
  return {'in_progress', int(e + smargin), int(now)}
end
clear_result(r)
r.l, r.y, r.e, r.O, r.U = nil, nil, nil, nil, nil
r.m, r.F, r.o = with_state(m, state), int(now - created), op
r.R = who .. '\31' .. int(now) .. '\31' .. note
set_result(r, result)
local ttl = redis.call('PTTL', key)
index_rem(member)
if ttl >= 0 and ttl < retention then
  return {'settled', save(r, retention)}
end
return {'settled', save(r, nil)}

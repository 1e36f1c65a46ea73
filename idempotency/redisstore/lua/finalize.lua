-- Implements docs/DESIGN.md 6, "The record and its lifecycle": Finalize (lifecycle.Finalize).
-- finalize: arguments (internal/scriptargs.Finalize) token, state (a, r,
-- u), op tag, ttl (ms), never (never sent), member the record's member in
-- its unknown index bucket (KEYS[2]), inc the caller's incarnation
-- (another record's is stale; '' and a record without one are not
-- compared), then the result (see set_result).
-- A final outcome removes the index entry in this script; an unknown one
-- keeps it (its score follows the record's new expiry); a stale or re-sent
-- finalize writes nothing there.
-- The token is the fence: an in_progress record whose lease expired, but that
-- no claim took over, still accepts its own attempt's outcome, and so does
-- one that the lease-expiry path turned unknown (no F) without a new token.
-- Never sent takes the attempt back only from an in_progress record.
-- Replies {finalized, the record without its body[, 1 if applied before]}:
-- the caller has the body it just sent.
local r = load()
if r == nil then
  return {'not_found'}
end
local m, n, rop, created = r.m or '', tonumber(r.n) or 0, r.o, tonumber(r.C) or 0
local sent, settled = tonumber(r.s) or n, r.F ~= nil
local s = string.sub(m, 1, 1)

if rop == op then
  return {'finalized', encode(r, false), 1}
end
if n ~= token or inc ~= '' and r.i ~= nil and r.i ~= inc or not (s == 'f' or (s == 'u' and not settled)) then
  return {'stale'}
end
local now = now_ms()
clear_result(r)
r.l, r.y, r.e, r.O, r.U = nil, nil, nil, nil, nil
r.m, r.F, r.o = with_state(m, state), int(now - created), op
set_result(r, result)
if never and s == 'f' and sent > 0 then
  put_sent(r, n, sent - 1)
end
if state == 'u' then
  index_add(member, now, ttl, false)
else
  index_rem(member)
end
return {'finalized', save(r, ttl)}

-- Implements docs/DESIGN.md 6, "The record and its lifecycle", "Settling a claim" (lifecycle.GiveBack).
-- giveback: arguments (internal/scriptargs.GiveBack) token, cop the
-- claim's op tag, op tag, uretention unknown retention (ms), member the
-- record's member in its unknown index bucket (KEYS[2]), inc the record's
-- incarnation as the claim answered it (8 bytes, or '': not checked).
-- It gives back the attempt that the claim with that op tag reserved and
-- nobody sent: a finalize of the token as never sent, guarded by the claim
-- (K, claim.lua). It applies only while the record is in flight on that
-- token, or unknown on it with no finalize or settle since (the lease-expiry
-- path writes o, never a token or F), and the claim recorded in K is that
-- claim with that token. The record becomes unknown, finalized (F), with the
-- attempt taken back (s), so the next claim re-opens the slot by the row "no
-- attempt may have left"; it keeps its index entry (scored by its new
-- expiry), as an unknown record does. Anything else is stale and writes
-- nothing. K keeps the claim's op tag, its token replaced by 'g' (given
-- back): a late copy of the claim answers applied and reserves nothing.
-- Replies {given_back[, 1 if applied before]}, {stale} or {not_found}.
local r = load()
if r == nil then
  return {'not_found'}
end
local m, n, rop, created = r.m or '', tonumber(r.n) or 0, r.o, tonumber(r.C) or 0
local sent = tonumber(r.s) or n
local s = string.sub(m, 1, 1)

if rop == op then
  return {'given_back', 1}
end
-- A record made again under the key (another incarnation) is another's.
if inc ~= '' and r.i ~= nil and r.i ~= inc then
  return {'stale'}
end
if r.K ~= cop .. int(token) or n ~= token or not (s == 'f' or (s == 'u' and r.F == nil)) then
  return {'stale'}
end
local now = now_ms()
r.l, r.y, r.e, r.O, r.U = nil, nil, nil, nil, nil
r.m, r.F, r.o, r.K = with_state(m, 'u'), int(now - created), op, cop .. 'g'
if sent > 0 then
  put_sent(r, n, sent - 1)
end
index_add(member, now, uretention, false)
save(r, uretention)
return {'given_back'}

-- Implements docs/DESIGN.md 6, "The record and its lifecycle", "Approval on a redispatch" (lifecycle.Decide).
-- decide: arguments (internal/scriptargs.Decide) ticket, approve, op tag,
-- retention (ms), member the record's member in its unknown index bucket
-- (KEYS[2]) and its pending approvals bucket (KEYS[3]), sv the scope version (a record of another is
-- scope_version_conflict, as for a claim): a denial makes the record
-- final, so it removes the entry (a held record was never reserved, so it
-- has none; the ZREM keeps "a final record has no entry" in the script).
-- The first decision is final: repeating it answers it again, contradicting
-- it answers the decision that stands.
-- A record that a claim re-held (claim.lua: it would have dispatched again)
-- is not held: the decision sets only its approved flag, '1' or '0'
-- (denied), and keeps its state (an unknown record stays unknown: its
-- effect may have happened), TTL and index entry. A final record that
-- kept a re-hold's ticket without a decision answers not_found and
-- writes nothing.
local r = load()
if r == nil then
  return {'not_found'}
end
local t, m, ap, rop = r.t, r.m or '', r.a, r.o
local s = string.sub(m, 1, 1)
if t ~= ticket then
  return {'not_found'}
end
if r.w ~= sv then
  return {'scope_version_conflict'}
end

local standing
if s == 'd' or ap == '0' then
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
-- The decision ends the wait: the entry in the pending approvals bucket
-- (KEYS[3]; claim.lua, held_add) goes after the record is written. A ZREM first
-- would be the script's first write, after which Redis lets a script write
-- over maxmemory; and an entry left by a failed ZREM is dropped by the
-- listing, which reads the record decided.
local function held_rem()
  redis.call('ZREM', KEYS[3], member)
end
-- A final record (settled, say, while re-held) awaits no decision: its
-- leftover ticket is as gone, and nothing is written.
if s == 'a' or s == 'r' then
  return {'not_found'}
end
if s ~= 'h' then
  r.a = approve and '1' or '0'
  save(r, nil)
  held_rem()
  return {approve and 'approved' or 'denied'}
end
local now = now_ms()
if approve then
  r.a = '1'
else
  r.m = with_state(m, 'd')
end
r.U, r.o = int(now), op
if not approve then
  index_rem(member)
end
save(r, retention)
held_rem()
return {approve and 'approved' or 'denied'}

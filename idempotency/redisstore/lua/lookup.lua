-- Implements docs/DESIGN.md 6, "The record and its lifecycle": a read that changes nothing.
-- lookup (read-only): the whole record, the server time, so that lease
-- expiry is judged by the Redis clock, and 1 for a record of schema 1.
local r, legacy, raw = load()
if r == nil then
  return {'not_found'}
end
return {'found', now_ms(), raw or encode(r, true), legacy and 1 or 0}

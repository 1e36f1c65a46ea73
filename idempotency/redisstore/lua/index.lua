-- Implements docs/DESIGN.md 6, "The record and its lifecycle", "Listing": the unknown index.
-- index: KEYS[1] is one bucket of a workspace's unknown index (or the
-- per-workspace key of a previous release), a sorted set of record members
-- scored by expiry (ms). The record scripts add and remove entries
-- (common.lua); this one serves the listing.
-- Arguments (internal/scriptargs.Index): op ('drop' or 'page'), score,
-- member, count. drop: the entry's member and the score the caller read;
-- page: score and member of the last entry read, count.
-- drop removes an entry only if its score is still the one read, so that a
-- record made again since then keeps its entry.
-- page returns up to count entries (member, score, ...) after the one
-- named, in (score, member) order: the order of the set, so ties of score
-- are paged too. It writes nothing.
-- It runs alone (without common.lua).
local key = KEYS[1]
-- num reads a score. Redis writes the integer scores of the index in full;
-- miniredis writes 1.5e+12, which its Lua does not read, so the exponent
-- is applied to the digits as text.
local function num(x)
  local n = tonumber(x)
  if n ~= nil then
    return n
  end
  local i, f, e = string.match(x, '^(%d+)%.?(%d*)[eE]%+?(%d+)$')
  if i == nil then
    return nil
  end
  e = tonumber(e)
  if #f > e then
    return tonumber(i .. string.sub(f, 1, e) .. '.' .. string.sub(f, e + 1))
  end
  return tonumber(i .. f .. string.rep('0', e - #f))
end
if op == 'page' then
  local from, after = score, member
  local fromn = num(from)
  local out, off = {}, 0
  while #out < 2 * count do
    local b = redis.call('ZRANGE', key, from, '+inf', 'BYSCORE', 'LIMIT', off, 2 * count, 'WITHSCORES')
    if #b == 0 then
      break
    end
    for i = 1, #b, 2 do
      if #out < 2 * count and not (num(b[i + 1]) == fromn and b[i] <= after) then
        out[#out + 1] = b[i]
        out[#out + 1] = b[i + 1]
      end
    end
    off = off + #b / 2
  end
  return out
end
local cur = redis.call('ZSCORE', key, member)
if cur and num(cur) == num(score) then
  redis.call('ZREM', key, member)
end
return {'ok'}

-- Implements docs/DESIGN.md 6, "The record and its lifecycle": the claim table (lifecycle.Claim).
-- claim: arguments (internal/scriptargs.Claim) sv scope version, rh
-- request hash, b binding, fp fingerprint, route the route record (its
-- fields c, p, T, M, H, P, u as stored: tag, length, value; the record's
-- bytes, so that the common fresh claim copies it as it is), ks key source,
-- approval (approval required), presented the presented ticket, fresh a
-- fresh ticket, op its op tag, lease, retention (ms), vk the vendor key (16
-- bytes, or '' for an unsupported binding), uretention unknown retention
-- (ms), timeout the attempt timeout (ms), refuse, nocreate (no record is
-- created: the row "none" answers no_record and writes nothing; any
-- existing record is claimed as without it), member the record's
-- member in its unknown index bucket (KEYS[2]) and its pending approvals
-- bucket (KEYS[3]), window (ms: how long the
-- vendor deduplicates on the key), inc the incarnation a record made by
-- this claim gets (8 bytes), maxatt the tool's max_attempts (how many
-- attempts of the slot may leave over its whole life).
-- The index: an answer that reserves an attempt (claimed) adds the entry in
-- this script, before the caller may send; no other answer writes it (a
-- replay, in_progress, held or a refusal writes nothing there), except that
-- an answer that extends an unknown or reserved record's TTL (a re-sent
-- claim, the lease-expiry path) raises its entry's score with it.
-- Replies: {status, ...}. Only 'replay' carries the record; contenders get a
-- bare status, except 'in_progress', which carries the running attempt's
-- deadline (0 if the record has none), and 'outcome_unknown' of a
-- redispatch refused by max_attempts or by its backoff, which carries why
-- ({outcome_unknown, 0, 'max_attempts'}, {outcome_unknown, 0, 'backoff',
-- ms until it is allowed}). 'claimed' is {claimed, token, lease
-- deadline, applied 0/1, the record's vendor key or '', attempt deadline,
-- the record's incarnation or '', moved}: the vendor key is made with the
-- record and never changes, so every attempt of the slot sends the same
-- one. moved (ms) is the TTL an existing record had before this claim
-- gave it a new one (a redispatch, the lease-expiry path), 0 otherwise;
-- 'outcome_unknown' and 'destination_conflict' after the lease-expiry
-- path carry it as their third element: the store's accounting of bytes
-- moves the record to its new expiry (quota.go).
-- The first lease, as every lease, ends at the attempt deadline at the
-- latest.
-- Every reservation records its claim in K (op tag, token): a copy of that
-- claim (the same op) learns its token while it is open and never reserves
-- again after its give-back, whatever was written since.
-- Approval: a claim that would dispatch an existing record again (a slot
-- that never sent, an unknown one with a vendor binding) for a tool that
-- requires approval needs the record's approval (a = '1'), which covers
-- every later redispatch of the slot; without it the claim re-holds the
-- record: it gets a ticket (once) and keeps its state, TTL and index entry.
-- A denial of such a record (a = '0') answers denied wherever a claim would
-- dispatch, whatever the tool requires now.
local now = now_ms()

-- held_add lists the record as awaiting a decision: its entry in the
-- pending approvals bucket of its workspace and slot (KEYS[3], pending.go),
-- scored by the record's expiry, now + ttl, and never lowered (GT). A
-- re-held record (not in state held: rehold) may also have its TTL moved
-- by reserve, finalize and give-back, which do not touch this bucket: an
-- attempt of the cycle a claim made, reserved or finalized while the
-- record lives, moves its expiry by less than its timeout plus
-- uretention (timeout < uretention), so its entry is scored 2 * uretention
-- past the expiry the claim sets. It is written before the record, as the
-- unknown index is, and prunes the bucket's expired entries; the bucket
-- lives as long as its latest entry. decide.lua removes the entry.
local function held_add(ttl, rehold)
  local held = KEYS[3]
  local life = ttl
  if rehold then
    life = ttl + 2 * uretention
  end
  redis.call('ZADD', held, 'GT', string.format('%d', now + life), member)
  redis.call('ZREMRANGEBYSCORE', held, '-inf', '(' .. string.format('%d', now))
  if redis.call('PEXPIRE', held, life, 'GT') == 0 then
    redis.call('PEXPIRE', held, life, 'NX')
  end
end

-- pending_follow keeps the entry of a re-held record that still awaits a
-- decision (a ticket, no decision) with the record's expiry, whenever this
-- script sets its TTL to ttl.
local function pending_follow(r, ttl)
  if r.t ~= nil and r.a == nil then
    held_add(ttl, true)
  end
end

local r, _, raw = load()
if r == nil then
  if refuse then
    return {'refused'}
  end
  if nocreate then
    return {'no_record'}
  end
  if approval then
    r = decode('\2' .. route)
    if r == nil then
      return redis.error_reply('ERR redisstore: route fields cut short')
    end
    r.m, r.w, r.q, r.f, r.n, r.t, r.C, r.U, r.o = 'h' .. ks .. b, sv, rh, fp, '0', fresh, int(now), int(now), op
    if vk ~= '' then
      r.k = vk
    end
    r.i = inc
    held_add(retention, false)
    save(r, retention)
    return {'held', fresh}
  end
  -- The claim of a fresh slot, the most common write, builds the record
  -- string directly, in the order of encode.
  local l, e = now + lease, now + timeout
  if l > e then
    l = e
  end
  local ms = uint_bytes(now)
  local out = {'\2', field('m', 'f' .. ks .. b), field('w', uint_bytes(sv)), field('l', uint_bytes(l)),
    'n\1\1y\1\1', field('e', uint_bytes(e)), field('q', rh), field('f', fp)}
  if vk ~= '' then
    out[#out + 1] = field('k', vk)
  end
  out[#out + 1] = field('i', inc)
  out[#out + 1] = route
  out[#out + 1] = field('C', ms) .. field('U', ms) .. field('o', op)
  out[#out + 1] = field('K', op .. '1')
  index_add(member, now, uretention, true)
  redis.call('SET', key, table.concat(out), 'PX', uretention)
  return {'claimed', 1, l, 0, vk, e, inc, 0}
end

local m, rsv, rrh, rfp = r.m or '', r.w, r.q, r.f
local n, l, t, ap, rop = tonumber(r.n) or 0, tonumber(r.l) or 0, r.t, r.a, r.o
-- A record made before vendor keys existed has none: it keeps sending the
-- client's key.
local rvk = r.k or ''
local sent, e = tonumber(r.s) or n, tonumber(r.e) or 0
local s, rb = string.sub(m, 1, 1), string.sub(m, 3, 3)

if rsv ~= sv then
  return {'scope_version_conflict'}
end
if not same_digest(rrh, rh) then
  return {'request_mismatch'}
end
-- Route and binding are compared only where the answer would dispatch.
local same_route = rb == b and same_digest(rfp, fp)

-- A re-sent claim whose first send was applied: answer what it answered.
-- The PEXPIRE is a write, so a WAIT that follows on this connection covers
-- the original write too.
if rop == op then
  if s == 'f' then
    index_add(member, now, uretention, false)
    pending_follow(r, uretention)
    redis.call('PEXPIRE', key, uretention)
    return {'claimed', n, l, 1, rvk, e, r.i or '', 0}
  elseif s == 'h' then
    redis.call('PEXPIRE', key, retention)
    held_add(retention, false)
    return {'held', t, 1}
  elseif s == 'u' and not (r.F == nil and r.K == op .. int(n)) then
    -- (An unknown record still on the token this claim reserved, turned
    -- unknown by another claim's lease-expiry path, which keeps o: the
    -- copy of the cycle's claim below answers its token.)
    index_add(member, now, uretention, false)
    pending_follow(r, uretention)
    redis.call('PEXPIRE', key, uretention)
    return {'outcome_unknown', 1}
  end
end

if s == 'a' or s == 'r' then
  return {'replay', raw or encode(r, true)}
end
if refuse then
  return {'refused'}
end

-- A copy of the claim that made this cycle (K) writes no attempt while
-- its token is in flight, or unknown without a finalize (the lease-expiry
-- path): it answers claimed with that token, applied, so that a re-sender
-- learns the token to give back. After the give-back (K's token 'g') it
-- answers outcome_unknown, applied. Once the cycle moved on otherwise (a
-- second attempt, a finalize, the store's own take-back of a reservation
-- whose WAIT fell short, whose caller re-sends this claim for a new one)
-- it is judged by the rows below, as any claim.
local rk = r.K
if rk ~= nil and string.sub(rk, 1, 8) == op then
  local kt = string.sub(rk, 9)
  if kt == 'g' then
    return {'outcome_unknown', 1}
  elseif tonumber(kt) == n and (s == 'f' or (s == 'u' and r.F == nil)) then
    index_add(member, now, uretention, false)
    pending_follow(r, uretention)
    redis.call('PEXPIRE', key, uretention)
    return {'claimed', n, l, 1, rvk, e, r.i or '', 0}
  end
end

-- reserve_next reserves attempt n + 1 as a new cycle. The attempt it
-- replaces may still run until its deadline: E keeps the later of it and
-- the earlier ones' (settle.lua waits for both).
local function reserve_next()
  local nl, ne = now + lease, now + timeout
  if nl > ne then
    nl = ne
  end
  clear_result(r)
  if e > (tonumber(r.E) or 0) then
    r.E = int(e)
  end
  r.m, r.n, r.y, r.l, r.e, r.U, r.o, r.O, r.A = with_state(m, 'f'), int(n + 1), '1', int(nl), int(ne), int(now), op, nil,
    int(now)
  put_sent(r, n + 1, sent + 1)
  r.K = op .. int(n + 1)
  if sent == 0 then
    r.W = int(now) -- the first attempt that may leave (W absent: C)
  end
  index_add(member, now, uretention, true)
  pending_follow(r, uretention)
  local moved = redis.call('PTTL', key)
  save(r, uretention)
  return {'claimed', n + 1, nl, 0, rvk, ne, r.i or '', moved}
end

if s == 'f' and l > now then
  return {'in_progress', e}
elseif s == 'h' then
  if presented ~= '' and presented == t and ap == '1' then
    if not same_route then
      return {'destination_conflict'}
    end
    return reserve_next()
  end
  return {'held', t}
elseif s == 'd' then
  return {'denied'}
elseif s ~= 'u' and s ~= 'f' then
  return redis.error_reply('ERR redisstore: record has an unknown state')
end

-- lapse turns an in-flight record whose lease lapsed unknown (TTL and index
-- entry refreshed). Its attempt deadline stays: the attempt may still run
-- at its gateway, so a settle waits for it, and its owner's finalize still
-- applies. set_op records this claim's op (a re-sent claim answers
-- outcome_unknown again); a conflicting claim leaves the op as it was.
local function lapse(set_op)
  r.m, r.U, r.l, r.y, r.O = with_state(m, 'u'), int(now), nil, nil, nil
  if set_op then
    r.o = op
  end
  index_add(member, now, uretention, false)
  pending_follow(r, uretention)
  local moved = redis.call('PTTL', key)
  save(r, uretention)
  return moved
end

-- unknown, or in flight with an expired lease: whatever the attempt did is
-- unknown.
if not same_route then
  if s == 'f' then
    return {'destination_conflict', 0, lapse(false)}
  end
  return {'destination_conflict'}
end
-- No attempt may have left: the slot is as good as fresh. Otherwise only a
-- vendor that deduplicates on our key may see another attempt, and only
-- while it still remembers the key: the new attempt's lease must end inside
-- the vendor's window, measured from the first attempt that may have left.
-- The bindings that deduplicate are an allow-list (header, body_pointer,
-- in_process_keyed, meta): a binding letter added later is never
-- redispatched until it is listed here.
local first = tonumber(r.W) or tonumber(r.C) or 0
if sent == 0 or ((b == 'h' or b == 'p' or b == 'k' or b == 'm') and now + lease < first + window) then
  if ap == '0' then
    return {'denied'}
  elseif approval and ap ~= '1' then
    if t == nil then
      t = fresh
      r.t = t
      held_add(uretention, true) -- at least the record's life (its TTL stays)
      save(r, nil)
    end
    return {'held', t}
  end
  -- Bounded and spaced: at most maxatt attempts of the slot may leave over
  -- its life (sent, not tokens), and the redispatch after the n-th that may
  -- have left waits lease * 2^(n-1) (at most an hour) from the latest
  -- reservation (A, else C), from n = 2: the first one goes once no lease
  -- is live, as ever. A slot that sent nothing, and the copy of the
  -- cycle's claim (K, a re-sender whose reservation the store took back),
  -- do not wait. A refusal writes no op (its re-send is judged again); a
  -- lapsed record first becomes unknown.
  local why, wait = nil, 0
  if sent >= maxatt then
    why = 'max_attempts'
  elseif sent > 1 and not (rk ~= nil and string.sub(rk, 1, 8) == op) then
    local gap = lease
    for _ = 2, sent do
      if gap >= 3600000 then
        break
      end
      gap = gap * 2
    end
    if gap > 3600000 then
      gap = 3600000
    end
    wait = (tonumber(r.A) or tonumber(r.C) or 0) + gap - now
    if wait > 0 then
      why = 'backoff'
    end
  end
  if why ~= nil then
    local moved = 0
    if s == 'f' then
      moved = lapse(false)
    end
    if why == 'backoff' then
      return {'outcome_unknown', 0, moved, why, wait}
    end
    return {'outcome_unknown', 0, moved, why}
  end
  return reserve_next()
end
if s == 'f' then
  return {'outcome_unknown', 0, lapse(true)}
end
return {'outcome_unknown'}

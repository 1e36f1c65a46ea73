-- claim: ARGV = scope version, request hash, binding, fingerprint, route
-- record (connection, provider, tool, method, host, path joined by 0x1f),
-- key source, approval required (0/1), presented
-- ticket, fresh ticket, op tag, lease ms, retention ms, vendor key (16
-- bytes, or '' for an unsupported binding), unknown retention ms, attempt
-- timeout ms, refuse (0/1).
-- Replies: {status, ...}. Only 'replay' carries the record; contenders get a
-- bare status, except 'in_progress', which carries the running attempt's
-- deadline (0 if the record has none). 'claimed' is {claimed, token, lease
-- deadline, applied 0/1, the record's vendor key or '', attempt deadline}:
-- the vendor key is made with the record and never changes, so every
-- attempt of the slot sends the same one.
local sv, rh, b, fp, route, ks = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local approval, presented, fresh, op = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local lease, retention, vk = tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13]
local uretention, timeout, refuse = tonumber(ARGV[14]), tonumber(ARGV[15]), ARGV[16] == '1'
local now = now_ms()

-- with_vk appends the vendor key field and the route record's facts
-- (fields c, p, T, M, H, P; an empty fact is left out) to an HSET argument
-- list. A field each, not one: a value over 64 bytes would turn the hash
-- from a listpack into a hashtable, three times the memory.
local route_fields = {'c', 'p', 'T', 'M', 'H', 'P'}
local function with_vk(args)
  if vk ~= '' then
    args[#args + 1] = 'k'
    args[#args + 1] = vk
  end
  local i = 1
  for v in string.gmatch(route .. '\31', '([^\31]*)\31') do
    if v ~= '' then
      args[#args + 1] = route_fields[i]
      args[#args + 1] = v
    end
    i = i + 1
  end
  return args
end

if redis.call('EXISTS', key) == 0 then
  if refuse then
    return {'refused'}
  end
  if approval == '1' then
    redis.call('HSET', key, unpack(with_vk({'m', 'h' .. ks .. b, 'w', sv, 'q', rh, 'f', fp,
      'n', '0', 't', fresh, 'C', int(now), 'U', int(now), 'o', op})))
    touch(retention)
    return {'held', fresh}
  end
  local l, e = now + lease, now + timeout
  redis.call('HSET', key, unpack(with_vk({'m', 'f' .. ks .. b, 'w', sv, 'q', rh, 'f', fp,
    'n', '1', 'y', '1', 'l', int(l), 'e', int(e), 'C', int(now), 'U', int(now), 'o', op})))
  touch(uretention)
  return {'claimed', 1, l, 0, vk, e}
end

local r = redis.call('HMGET', key, 'm', 'w', 'q', 'f', 'n', 'l', 't', 'a', 'o', 'k', 's', 'e')
local m, rsv, rrh, rfp = r[1] or '', r[2], r[3], r[4]
local n, l, t, ap, rop = tonumber(r[5]) or 0, tonumber(r[6]) or 0, r[7], r[8], r[9]
-- A record made before vendor keys existed has none: it keeps sending the
-- client's key.
local rvk = r[10] or ''
local sent, e = tonumber(r[11]) or n, tonumber(r[12]) or 0
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
    touch(uretention)
    return {'claimed', n, l, 1, rvk, e}
  elseif s == 'h' then
    touch(retention)
    return {'held', t, 1}
  elseif s == 'u' then
    touch(uretention)
    return {'outcome_unknown', 1}
  end
end

if s == 'a' or s == 'r' then
  return {'replay', record(true)}
end
if refuse then
  return {'refused'}
end

-- reserve_next reserves attempt n + 1 as a new cycle.
local function reserve_next()
  local nl, ne = now + lease, now + timeout
  clear_result()
  redis.call('HSET', key, 'm', with_state(m, 'f'), 'n', int(n + 1), 'y', '1', 'l', int(nl), 'e', int(ne), 'U', int(now), 'o', op)
  redis.call('HDEL', key, 'O')
  put_sent(n + 1, sent + 1)
  touch(uretention)
  return {'claimed', n + 1, nl, 0, rvk, ne}
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

-- unknown, or in flight with an expired lease: whatever the attempt did is
-- unknown.
if not same_route then
  return {'destination_conflict'}
end
-- No attempt may have left: the slot is as good as fresh. Otherwise only a
-- vendor that deduplicates on our key may see another attempt.
if sent == 0 or b ~= 'u' then
  return reserve_next()
end
if s == 'f' then
  redis.call('HSET', key, 'm', with_state(m, 'u'), 'U', int(now), 'o', op)
  redis.call('HDEL', key, 'l', 'y', 'e', 'O')
  touch(uretention)
end
return {'outcome_unknown'}

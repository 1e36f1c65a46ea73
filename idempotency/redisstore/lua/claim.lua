-- claim: ARGV = scope version, request hash, binding, fingerprint, route
-- connection, route provider, key source, approval required (0/1), presented
-- ticket, fresh ticket, op tag, lease ms, retention ms, vendor key (16 bytes,
-- or '' for an unsupported binding).
-- Replies: {status, ...}. Only 'replay' carries the record; contenders get a
-- bare status. 'claimed' is {claimed, token, lease deadline, applied 0/1,
-- the record's vendor key or ''}: the vendor key is made with the record and
-- never changes, so every attempt of the slot sends the same one.
local sv, rh, b, fp, rc, rp, ks = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local approval, presented, fresh, op = ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local lease, retention, vk = tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[14]
local now = now_ms()

-- with_vk appends the vendor key field to an HSET argument list.
local function with_vk(args)
  if vk ~= '' then
    args[#args + 1] = 'k'
    args[#args + 1] = vk
  end
  return args
end

if redis.call('EXISTS', key) == 0 then
  if approval == '1' then
    redis.call('HSET', key, unpack(with_vk({'m', 'h' .. ks .. b, 'w', sv, 'q', rh, 'f', fp, 'c', rc, 'p', rp,
      'n', '0', 't', fresh, 'C', int(now), 'U', int(now), 'o', op})))
    touch(retention)
    return {'held', fresh}
  end
  local l = now + lease
  redis.call('HSET', key, unpack(with_vk({'m', 'f' .. ks .. b, 'w', sv, 'q', rh, 'f', fp, 'c', rc, 'p', rp,
    'n', '1', 'y', '1', 'l', int(l), 'C', int(now), 'U', int(now), 'o', op})))
  touch(retention)
  return {'claimed', 1, l, 0, vk}
end

local r = redis.call('HMGET', key, 'm', 'w', 'q', 'f', 'n', 'l', 't', 'a', 'o', 'k')
local m, rsv, rrh, rfp = r[1] or '', r[2], r[3], r[4]
local n, l, t, ap, rop = tonumber(r[5]) or 0, tonumber(r[6]) or 0, r[7], r[8], r[9]
-- A record made before vendor keys existed has none: it keeps sending the
-- client's key.
local rvk = r[10] or ''
local s, rb = string.sub(m, 1, 1), string.sub(m, 3, 3)

if rsv ~= sv then
  return {'scope_version_conflict'}
end
if not same_digest(rrh, rh) then
  return {'request_mismatch'}
end
if rb ~= b or not same_digest(rfp, fp) then
  return {'destination_conflict'}
end

-- A re-sent claim whose first send was applied: answer what it answered.
-- The PEXPIRE is a write, so a WAIT that follows on this connection covers
-- the original write too.
if rop == op then
  if s == 'f' then
    touch(retention)
    return {'claimed', n, l, 1, rvk}
  elseif s == 'h' then
    touch(retention)
    return {'held', t, 1}
  elseif s == 'u' then
    touch(retention)
    return {'outcome_unknown', 1}
  end
end

local expired = false
if s == 'f' then
  if l > now then
    return {'in_progress'}
  end
  expired = true -- the lease ran out: whatever the attempt did is unknown
elseif s == 'a' or s == 'r' then
  return {'replay', record(true)}
elseif s == 'h' then
  if presented ~= '' and presented == t and ap == '1' then
    local nl = now + lease
    redis.call('HSET', key, 'm', with_state(m, 'f'), 'n', int(n + 1), 'y', '1', 'l', int(nl), 'U', int(now), 'o', op)
    touch(retention)
    return {'claimed', n + 1, nl, 0, rvk}
  end
  return {'held', t}
elseif s == 'd' then
  return {'denied'}
elseif s ~= 'u' then
  return redis.error_reply('ERR redisstore: record has an unknown state')
end

-- unknown, or in flight with an expired lease
if b ~= 'u' then
  -- The vendor deduplicates on our key: reserve the next attempt, new cycle.
  local nl = now + lease
  clear_result()
  redis.call('HSET', key, 'm', with_state(m, 'f'), 'n', int(n + 1), 'y', '1', 'l', int(nl), 'U', int(now), 'o', op)
  touch(retention)
  return {'claimed', n + 1, nl, 0, rvk}
end
if expired then
  redis.call('HSET', key, 'm', with_state(m, 'u'), 'U', int(now), 'o', op)
  redis.call('HDEL', key, 'l', 'y')
  touch(retention)
end
return {'outcome_unknown'}

-- claim: ARGV = scope version, request hash, binding, fingerprint, route
-- connection, route provider, key source, approval required (0/1), presented
-- ticket, fresh ticket, op id, lease ms, retention ms.
-- Replies: {status, ...}. Only 'replay' carries the record; contenders get a
-- bare status.
local sv, rh, b, fp, rc, rp, ks = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local approval, presented, fresh = ARGV[8], ARGV[9], ARGV[10]
local op = 'c' .. ARGV[11]
local lease, retention = tonumber(ARGV[12]), tonumber(ARGV[13])
local now = now_ms()

if redis.call('EXISTS', key) == 0 then
  if approval == '1' then
    redis.call('HSET', key, 'v', '1', 'sv', sv, 's', 'h', 'ks', ks, 'rh', rh, 'b', b, 'fp', fp,
      'rc', rc, 'rp', rp, 'n', '0', 't', fresh, 'ca', int(now), 'ua', int(now), 'op', op)
    touch(retention)
    return {'held', fresh}
  end
  local l = now + lease
  redis.call('HSET', key, 'v', '1', 'sv', sv, 's', 'f', 'ks', ks, 'rh', rh, 'b', b, 'fp', fp,
    'rc', rc, 'rp', rp, 'n', '1', 'cy', '1', 'l', int(l), 'ca', int(now), 'ua', int(now), 'op', op)
  touch(retention)
  return {'claimed', 1, l}
end

local r = redis.call('HMGET', key, 'sv', 'rh', 'b', 'fp', 's', 'n', 'l', 't', 'ap', 'op')
local rsv, rrh, rb, rfp, s, n, l, t, ap, rop = r[1], r[2], r[3], r[4], r[5], tonumber(r[6]) or 0, tonumber(r[7]) or 0, r[8], r[9], r[10]

if rsv ~= sv then
  return {'scope_version_conflict'}
end
if rrh ~= rh then
  return {'request_mismatch'}
end
if rb ~= b or rfp ~= fp then
  return {'destination_conflict'}
end

-- A re-sent claim whose first send was applied: answer what it answered.
-- The PEXPIRE is a write, so a WAIT that follows on this connection covers
-- the original write too.
if rop == op then
  if s == 'f' then
    touch(retention)
    return {'claimed', n, l, 1}
  elseif s == 'h' then
    touch(retention)
    return {'held', t, 1}
  elseif s == 'u' then
    touch(retention)
    return {'outcome_unknown', 1}
  end
end

if s == 'f' then
  if l > now then
    return {'in_progress'}
  end
  s = 'u' -- the lease expired: whatever the attempt did is unknown
elseif s == 'a' or s == 'r' then
  return {'replay', record(true)}
elseif s == 'h' then
  if presented ~= '' and presented == t and ap == '1' then
    local nl = now + lease
    redis.call('HSET', key, 's', 'f', 'n', int(n + 1), 'cy', '1', 'l', int(nl), 'ua', int(now), 'op', op)
    touch(retention)
    return {'claimed', n + 1, nl}
  end
  return {'held', t}
elseif s == 'd' then
  return {'denied'}
end

if s == 'u' then
  if b ~= 'u' then
    -- The vendor deduplicates on our key: reserve the next attempt, new cycle.
    local nl = now + lease
    clear_result()
    redis.call('HSET', key, 's', 'f', 'n', int(n + 1), 'cy', '1', 'l', int(nl), 'ua', int(now), 'op', op)
    touch(retention)
    return {'claimed', n + 1, nl}
  end
  if r[5] == 'f' then
    redis.call('HSET', key, 's', 'u', 'ua', int(now), 'op', op)
    redis.call('HDEL', key, 'l')
    touch(retention)
  end
  return {'outcome_unknown'}
end

return redis.error_reply('ERR redisstore: record has an unknown state')

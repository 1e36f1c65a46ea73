-- Shared by every script (prepended at build time). One key only: KEYS[1],
-- the record hash. Time comes from the server clock: Redis 7 replicates the
-- effects of a script, not the script, so TIME is safe here.
--
-- Record fields (schema 1): v schema, sv scope version, s state
-- (h held, f in_flight, a accepted, r definitely_rejected, u unknown,
-- d denied), ks key source, rh request hash (hex), b binding (h, p, u),
-- fp fingerprint (hex), rc/rp route connection/provider, n attempt count =
-- fencing token, cy attempts in the current cycle, l lease deadline (ms),
-- t ticket, ap approved, st status, bd body, bx body dropped, h* headers,
-- ca/ua/fa created/updated/finalized (ms), op last operation (kind + op id).
local key = KEYS[1]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function int(x)
  return string.format('%d', x)
end

local function touch(retention)
  redis.call('PEXPIRE', key, retention)
end

-- clear_result removes a stored result (status, body, headers).
local function clear_result()
  local del = {}
  for _, f in ipairs(redis.call('HKEYS', key)) do
    if string.sub(f, 1, 1) == 'h' or f == 'st' or f == 'bd' or f == 'bx' or f == 'fa' then
      del[#del + 1] = f
    end
  end
  if #del > 0 then
    redis.call('HDEL', key, unpack(del))
  end
end

-- record returns the hash as a flat array, without the body unless asked.
local function record(with_body)
  local all = redis.call('HGETALL', key)
  if with_body then
    return all
  end
  local out = {}
  for i = 1, #all, 2 do
    if all[i] ~= 'bd' then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
  return out
end

-- Shared by every script (prepended at build time). One key only: KEYS[1],
-- the record hash. Time comes from the server clock: Redis 7 replicates the
-- effects of a script, not the script, so TIME is safe here.
--
-- Record fields (schema 1; single letters keep the hash a small listpack):
--   m  state, key source, binding: 3 bytes. State h held, f in_flight,
--      a accepted, r definitely_rejected, u unknown, d denied; key source
--      s supplied, m minted; binding h header, p body_pointer, u unsupported
--   w  scope version           q  request hash (32 bytes)
--   f  fingerprint (32 bytes)
--      (records made before digests were packed hold 64 hex digits)
--   c, p, T, M, H, P  route record: connection, provider, tool, method,
--      host, path (absent when empty; records made before hold c and p)
--   k  vendor key (its 16 bytes; header and body_pointer bindings, absent on
--      records made before vendor keys)
--   n  attempts = fencing token
--   s  attempts that may have left, only when fewer than n (a finalize
--      reported an attempt never sent); absent means n
--   y  attempts in this cycle  l  lease deadline (ms)     (in flight only)
--   e  attempt deadline (ms)   O  last renewal's op tag   (in flight only)
--   t  ticket                  a  approved ("1")
--   C  created (ms)            U  updated (ms)            (until finalized)
--   F  finalized (ms after C; then also the last update)
--   x  status                  B  body                    D  body dropped
--   0-9, :Name  kept headers
--   o  last operation: 8-byte digest of its kind and op id
--   An unknown record without F was turned unknown by the lease-expiry
--   path; its owner's finalize still applies.
--   R  resolution of a settle: who, time (ms), note, joined by 0x1f
--   v  schema version, absent for 1
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

-- same_digest compares a stored digest with the 32 bytes of a request; a
-- record made before digests were packed holds 64 hex digits.
local function same_digest(stored, raw)
  if stored ~= nil and #stored == 64 then
    return stored == string.gsub(raw, '.', function(c) return string.format('%02x', string.byte(c)) end)
  end
  return stored == raw
end

-- put_sent stores the count of attempts that may have left for a record of
-- n attempts: no field when it is n, the usual case.
local function put_sent(n, sent)
  if sent == n then
    redis.call('HDEL', key, 's')
  else
    redis.call('HSET', key, 's', int(sent))
  end
end

-- with_state replaces the state byte of m.
local function with_state(m, s)
  return s .. string.sub(m, 2)
end

-- clear_result removes a stored result (status, body, headers, finalized).
local function clear_result()
  local del = {}
  for _, f in ipairs(redis.call('HKEYS', key)) do
    local c = string.sub(f, 1, 1)
    if c == 'x' or c == 'B' or c == 'D' or c == 'F' or c == ':' or (c >= '0' and c <= '9') then
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
    if all[i] ~= 'B' then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
  return out
end

-- Implements docs/DESIGN.md 6, "The record and its lifecycle": the record's
-- encoding, "Script arguments", the unknown index and, for "Store amnesia",
-- the generation sentinel.
-- Shared by every script (prepended at build time). KEYS[1] is the record;
-- the scripts that reserve an attempt or make a record final also get
-- KEYS[2], the bucket of the record's workspace's unknown index that lives
-- in the record's Cluster slot (settle.go), and the record's member there;
-- claim and decide also get KEYS[3], the pending approvals bucket of that
-- workspace and slot (pending.go); claim and reserve get last the slot's
-- generation sentinel (gen_wrap below). Every key a script touches is
-- declared (internal/scriptargs checks the count).
-- Time comes from the server clock: Redis 7 replicates the effects of a
-- script, not the script, so TIME is safe here.
-- Arguments: each script's are one struct of internal/scriptargs; the store
-- puts the prologue generated from it (the count checked, each argument
-- in a local of its name) between this chunk and the script's body, so
-- bodies read arguments by name and never ARGV by position (set_result
-- below reads a script's remaining arguments from the index it is given).
--
-- The record (schema 2) is one Redis string, so that no body ever turns it
-- into a larger encoding: byte 0 is the schema version (2), then fields,
-- each a one-byte tag, the value's length (one byte below 128, else
-- LEB128) and the value. Numbers (w n s y l e C U F x z W A E) are unsigned
-- big-endian bytes, no byte for 0. The body's size (z) and the body come
-- last, so that a reply without them is the record cut short (records
-- written before hold z ahead of the headers: fields are read by tag). The scripts read a record into a
-- table of its fields (numbers as decimal text) and write it back whole.
--   m  state, key source, binding: 3 bytes. State h held, f in_progress,
--      a accepted, r definitely_rejected, u unknown, d denied; key source
--      s supplied, m minted; binding h header, p body_pointer, u unsupported,
--      i in_process, k in_process_keyed, m meta
--   w  scope version           q  request hash (32 bytes)
--   f  fingerprint (32 bytes)
--      (records made before digests were packed hold 64 hex digits)
--   c, p, T, M, H, P, u  route record: connection, provider, tool, method,
--      host, path, an MCP route's upstream tool (absent when empty; records
--      made before hold c and p)
--   k  vendor key (its 16 bytes; the bindings that send one, absent on
--      records made before vendor keys)
--   i  incarnation: 8 random bytes written when the record is created
--      (fresh claim, held); reserve, renew and finalize compare it with
--      the caller's, so that a token restarted on a record made again never
--      matches an old worker's. A caller's '' and a record without i (made
--      before, or rewritten by a previous release's scripts, which drop the
--      field) are not compared.
--   n  attempts = fencing token
--   s  attempts that may have left, only when fewer than n (a finalize
--      reported an attempt never sent); absent means n
--   y  attempts in this cycle  l  lease deadline (ms)     (in flight only)
--   e  attempt deadline (ms)   O  last renewal's op tag   (in flight only)
--   t  ticket                  a  approved ("1"); "0": denied, on a record
--      that a claim re-held in another state (claim.lua), which it keeps
--   C  created (ms)            U  updated (ms)            (until finalized)
--   W  when the first attempt that may have left was reserved (ms), when
--      it is not C: a held slot's resume, a redispatch of a slot that sent
--      nothing. The vendor's window is measured from it.
--   A  when the latest attempt was reserved (ms), when it is not C: the
--      backoff of a redispatch is measured from it (claim.lua)
--   E  the latest attempt deadline of an earlier attempt that may have
--      left (ms): a reservation that replaces e keeps the later of the
--      two here; a settle waits for it as for e (settle.lua)
--   F  finalized (ms after C; then also the last update)
--   x  status                  D  body dropped ("1")
--   z  the body's size before compression, DEFLATE (absent: stored as sent)
--   0-9  kept headers by code; ':' a kept header as "Name:value"
--   J  Content-Type: application/json (empty: the most common header)
--   o  last operation: 8-byte digest of its kind and op id
--   K  the claim that made the current cycle: its op tag (as o), then its
--      token in decimal, or 'g' once given back. A copy of that claim
--      learns its open token and never reserves after the give-back
--      (claim.lua); only that claim can give its token back (giveback.lua)
--   R  resolution of a settle: who, time (ms), note, joined by 0x1f
--   B  body (last)
--   An unknown record without F was turned unknown by the lease-expiry
--   path; its owner's finalize still applies.
-- The final form: a final record (a, r) whose digests are packed and that
-- has o, C and F is written as byte 3 then its fields at fixed places,
-- without tags (encode_final; decode_final reads it as the same table):
--   byte 1: m (bit 0 state a/r, bit 1 key source s/m, bits 2-4 binding
--   h p u i k m); byte 2: flags (1 k present, 2 J, 4 D, 8 unused, 16 the
--   body's size precedes it; bits 5-7 the method: 1-7 GET POST PUT
--   PATCH DELETE HEAD OPTIONS, 0 none or a field M of the tail); then w
--   (LEB128), q (32
--   bytes), f (32), k (16, if flagged), o (8), n, C, F (LEB128), the
--   status as one byte (1-255: 101-355; 0 none or a field x of the tail),
--   H and P (LEB128 length, value; empty: absent); then the tail: any
--   other field as above (tag, length, value), then a 0 byte; then, with
--   the body, its size (LEB128, if flagged) and the body, the rest of the
--   string. So the record without its body is again a prefix. A final
--   record keeps neither i, K, A nor E, in either form.
-- A record of schema 1 is a hash of the same fields (numbers as decimal
-- text, ':Name' header fields): it is read as it is, and the first write
-- stores it as schema 2.
local key = KEYS[1]

-- Store amnesia (docs/DESIGN.md, "The record and its lifecycle"): every
-- Cluster slot has a sentinel, {prefix}meta:gen:{T}, in the slot itself,
-- holding the slot's generation. The store runs claim and reserve inside
-- gen_wrap (scripts.go puts the body in the function it is given), with the
-- sentinel as their last key and the highest generation the gateway has
-- seen in that slot (seen; -1: the check is off). A sentinel that is gone,
-- or behind seen, is a store that lost writes (emptied, restored from an
-- older snapshot, a promoted replica that missed them): the script answers
-- data_lost and runs nothing. (seen 0: the gateway has seen none there,
-- and a store that was not initialised explicitly gets the sentinel from
-- its first reservation; a store that requires it never sends 0.)
-- Otherwise the body runs, and an answer that
-- reserves an attempt (claimed, reserved; not their re-sent copies, whose
-- applied flag is 1) moves the generation on, after the body's own writes
-- (so a replay, which writes nothing, still writes nothing, also near
-- maxmemory). The reply is {the body's reply, the
-- slot's generation now} (0 when the check is off; -1 for a sentinel gone). The body runs as a
-- closure: Lua 5.1 allows it 60 upvalues (claim.lua uses some 35).
-- The layouts of the replies that reserve an attempt, by field position
-- (reply.go mirrors them; TestReplyLayout checks both):
-- {claimed, token, lease deadline, applied, vendor key, attempt deadline,
-- incarnation, moved} and {reserved, token, lease deadline, attempt
-- deadline[, applied]}.
local CLAIMED = {token = 2, lease = 3, applied = 4, vk = 5, deadline = 6, inc = 7, moved = 8}
local RESERVED = {token = 2, lease = 3, deadline = 4, applied = 5}
local function gen_wrap(k, seen, body)
  if seen < 0 then
    return {body(), 0}
  end
  local g = tonumber(redis.call('GET', k))
  if g == nil and seen == 0 then
    g = 0
  elseif g == nil or g < seen then
    return {{'data_lost'}, g or -1}
  end
  local reply = body()
  if reply.err then
    return reply
  end
  if reply[1] == 'claimed' and reply[CLAIMED.applied] ~= 1 or reply[1] == 'reserved' and reply[RESERVED.applied] ~= 1 then
    g = redis.call('INCR', k)
  end
  return {reply, g}
end

-- The index is written before the record: a script that fails on its
-- bucket writes nothing, so no reservation stands unindexed.
-- index_add puts the record's member in its bucket, scored by the record's
-- expiry (now + ttl ms): never lowered (GT), so that the entry lives as
-- long as the record. prune (at a reservation) also removes the entries
-- that already expired. The bucket lives as long as its newest entry.
local function index_add(member, now, ttl, prune)
  local bucket = KEYS[2]
  redis.call('ZADD', bucket, 'GT', string.format('%d', now + ttl), member)
  if prune then
    redis.call('ZREMRANGEBYSCORE', bucket, '-inf', '(' .. string.format('%d', now))
  end
  -- One call in the usual case: GT raises a TTL that is lower, NX sets the
  -- TTL of a bucket that this ZADD just made (GT never sets a missing one).
  if redis.call('PEXPIRE', bucket, ttl, 'GT') == 0 then
    redis.call('PEXPIRE', bucket, ttl, 'NX')
  end
end

-- index_rem removes the member of a record that just became final.
local function index_rem(member)
  redis.call('ZREM', KEYS[2], member)
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function int(x)
  return string.format('%d', x)
end

-- The tags of numbers, and the order of the fields in the string: state,
-- version and lease first, as CountRecords reads only a prefix; then the
-- headers; the body's size (z) and the body (B) last, so that the record
-- without its body is a prefix of the string. Every call runs this chunk,
-- so the tables are made by the one function that needs them.
local function numeric_set()
  return {w = true, n = true, s = true, y = true, l = true, e = true, C = true, U = true, F = true, x = true, z = true,
    W = true, A = true, E = true}
end

local function len_bytes(n)
  if n < 128 then
    return string.char(n)
  end
  local len = ''
  while n >= 128 do
    len = len .. string.char(128 + n % 128)
    n = math.floor(n / 128)
  end
  return len .. string.char(n)
end

local function put(out, tag, v)
  out[#out + 1] = tag .. len_bytes(#v) .. v
end

-- field is one field as stored, for a script that writes a record
-- without a table: tag, length, value.
local function field(tag, v)
  return tag .. len_bytes(#v) .. v
end

-- uint_bytes writes a number as unsigned big-endian bytes, none for 0.
-- The scripts' numbers stay below 2^53 (at most 7 bytes). One string.char
-- call per number: a time (6 bytes) is written on every record write.
local function uint_bytes(v)
  local x = tonumber(v) or 0
  if x < 256 then
    return x > 0 and string.char(x) or ''
  end
  local b1 = x % 256
  x = (x - b1) / 256
  local b2 = x % 256
  x = (x - b2) / 256
  if x == 0 then
    return string.char(b2, b1)
  end
  local b3 = x % 256
  x = (x - b3) / 256
  if x == 0 then
    return string.char(b3, b2, b1)
  end
  local b4 = x % 256
  x = (x - b4) / 256
  if x == 0 then
    return string.char(b4, b3, b2, b1)
  end
  local b5 = x % 256
  x = (x - b5) / 256
  if x == 0 then
    return string.char(b5, b4, b3, b2, b1)
  end
  local b6 = x % 256
  x = (x - b6) / 256
  if x == 0 then
    return string.char(b6, b5, b4, b3, b2, b1)
  end
  return string.char(x, b6, b5, b4, b3, b2, b1)
end

-- nat is v as a whole number >= 0, or nil.
local function nat(v)
  local x = tonumber(v)
  if x ~= nil and x >= 0 and x == math.floor(x) then
    return x
  end
  return nil
end

-- meta_byte is field m of a final record as the final form's byte 1: bit
-- 0 the state (a 0, r 1), bit 1 the key source (s 0, m 1), bits 2-4 the
-- binding (h p u i k m: 0-5); nil for another.
local function meta_byte(m)
  local s, ks = string.byte(m, 1, 2)
  local bs = #m == 3 and string.find('hpuikm', string.sub(m, 3), 1, true)
  if not bs or (s ~= 97 and s ~= 114) or (ks ~= 115 and ks ~= 109) then
    return nil
  end
  return (s == 114 and 1 or 0) + (ks == 109 and 2 or 0) + (bs - 1) * 4
end

-- byte_meta reverses meta_byte.
local function byte_meta(v)
  local bs = math.floor(v / 4) + 1
  if bs > 6 then
    return nil
  end
  return (v % 2 == 1 and 'r' or 'a') .. (math.floor(v / 2) % 2 == 1 and 'm' or 's') .. string.sub('hpuikm', bs, bs)
end

-- compact is r's byte 1 in the final form (byte 0 is 3, below), or nil
-- when r is not written so: a final record (a, r) with packed digests,
-- its op tag and the numbers every final record has.
local function compact(r)
  local mb = meta_byte(r.m or '')
  return mb ~= nil and r.q ~= nil and #r.q == 32 and r.f ~= nil and #r.f == 32
    and r.o ~= nil and #r.o == 8 and (r.k == nil or #r.k == 16) and nat(r.w) ~= nil and nat(r.n) ~= nil
    and nat(r.C) ~= nil and nat(r.F) ~= nil and (r.J == nil or r.J == '')
    and (r.D == nil or r.D == '1') and r.H ~= '' and r.P ~= '' and (r.z == nil or nat(r.z) ~= nil) and mb or nil
end

-- method_code is the code of the final form for a method (0: none, the
-- method is a field of the tail); code_method the reverse. The codes are
-- part of the layout: append only.
local function code_method(c)
  return ({'GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'})[c]
end

local function method_code(v)
  return ({GET = 1, POST = 2, PUT = 3, PATCH = 4, DELETE = 5, HEAD = 6, OPTIONS = 7})[v] or 0
end

-- status_code is the final form's byte for a status: 1-255 for 101-355,
-- 0 for none or another (then a field x of the tail).
local function status_code(v)
  local x = nat(v)
  if x ~= nil and x > 100 and x <= 355 then
    return x - 100
  end
  return 0
end

-- tagged appends r's fields of order that skip(f) does not leave out,
-- then its ':' and digit fields, as schema 2 fields (tag, length, value).
local function tagged(out, r, order, skip)
  local num = numeric_set()
  for i = 1, #order do
    local f = order[i]
    local v = r[f]
    if v ~= nil and not skip(f) then
      if num[f] then
        v = uint_bytes(v)
      end
      out[#out + 1] = f .. len_bytes(#v) .. v
    end
  end
  for f, v in pairs(r) do
    local c = string.byte(f, 1)
    if c == 58 then -- ':'
      put(out, ':', string.sub(f, 2) .. ':' .. v)
    elseif c >= 48 and c <= 57 and #f == 1 then -- '0'..'9'
      out[#out + 1] = f .. len_bytes(#v) .. v
    end
  end
end

-- tail writes the fields of r that the final form has no place for, as
-- schema 2 fields (tag, length, value), then a 0 byte.
local function tail(out, r, mc, sc)
  local order = {'l', 's', 'y', 'e', 'c', 'p', 'T', 'M', 'u', 't', 'a', 'U', 'O', 'x', 'R', 'W'}
  tagged(out, r, order, function(f) return f == 'M' and mc > 0 or f == 'x' and sc > 0 end)
  out[#out + 1] = '\0'
end

-- encode_final writes r in the final form (mb: compact(r)), without its
-- body: the string with the body is this one followed by the body's size
-- (when flag 16) and the body.
local function encode_final(r, mb)
  local mc, sc = method_code(r.M), status_code(r.x)
  local flags = mc * 32
  if r.k ~= nil then flags = flags + 1 end
  if r.J ~= nil then flags = flags + 2 end
  if r.D ~= nil then flags = flags + 4 end
  if r.z ~= nil and r.B ~= nil then
    flags = flags + 16
  end
  local h, p = r.H or '', r.P or ''
  local out = {'\3', string.char(mb, flags), len_bytes(nat(r.w)), r.q, r.f, r.k or '', r.o, len_bytes(nat(r.n)),
    len_bytes(nat(r.C)), len_bytes(nat(r.F)), string.char(sc), len_bytes(#h), h, len_bytes(#p), p}
  tail(out, r, mc, sc)
  return table.concat(out)
end

-- body_part is what follows a record's string without its body: the size
-- and the body.
local function body_part(r, final)
  if r.B == nil then
    return ''
  end
  if final then
    if r.z == nil then
      return r.B
    end
    return len_bytes(nat(r.z)) .. r.B
  end
  return (r.z ~= nil and field('z', uint_bytes(r.z)) or '') .. 'B' .. len_bytes(#r.B) .. r.B
end

-- encode writes a record table as a schema 2 string, with or without its
-- body; a final record in the final form when it can (compact). The
-- string without the body is the one with it cut short. A final record
-- keeps neither incarnation (i), its cycle's claim (K), nor the times of
-- its attempts (A, E): no script reads them once the record is final.
local function encode(r, with_body)
  local mb = compact(r)
  if mb ~= nil then
    local head = encode_final(r, mb)
    if with_body then
      return head .. body_part(r, true)
    end
    return head
  end
  local s = string.sub(r.m or '', 1, 1)
  local final = s == 'a' or s == 'r'
  local order = {'m', 'w', 'l', 'n', 's', 'y', 'e', 'q', 'f', 'k', 'i', 'c', 'p', 'T', 'M', 'H', 'P', 'u', 't', 'a',
    'C', 'U', 'F', 'o', 'O', 'x', 'D', 'R', 'J',
    'W', 'K', 'A', 'E'}
  local out = {'\2'}
  tagged(out, r, order, function(f) return final and (f == 'i' or f == 'K' or f == 'A' or f == 'E') end)
  if with_body then
    out[#out + 1] = body_part(r, false)
  end
  return table.concat(out)
end

-- uvar reads the LEB128 number at i of raw: the number and the index after
-- it, or nil when raw ends first.
local function uvar(raw, i)
  local b = string.byte(raw, i)
  if b == nil then
    return nil
  end
  if b < 128 then
    return b, i + 1
  end
  local n, mul = b - 128, 128
  repeat
    i = i + 1
    b = string.byte(raw, i)
    if b == nil then
      return nil
    end
    n = n + (b % 128) * mul
    mul = mul * 128
  until b < 128
  return n, i + 1
end

-- fields reads schema 2 fields from i of raw into r, up to the end of raw
-- or (stop) to a 0 byte. It returns the index after them (after the 0
-- byte), or nil for fields cut short.
local function fields(raw, i, r, stop)
  local byte = string.byte
  local num = numeric_set()
  local last = #raw
  while i <= last do
    local tag, n = byte(raw, i, i + 1)
    if stop and tag == 0 then
      return i + 1
    end
    if n == nil then
      return nil
    end
    i = i + 1
    if n >= 128 then
      -- uvar, inline: every script decodes its record field by field, and
      -- a call per field costs more than the few lengths of 128 or more.
      local mul, b = 128, 0
      n = n - 128
      repeat
        i = i + 1
        b = byte(raw, i)
        if b == nil then
          return nil
        end
        n = n + (b % 128) * mul
        mul = mul * 128
      until b < 128
    end
    if i + n > last then
      return nil
    end
    tag = string.char(tag)
    if num[tag] then
      -- Numbers are read from the bytes in place: at most 7 (2^53).
      local x = 0
      if n > 0 then
        local a, b, c, d, e, f, g = byte(raw, i + 1, i + n)
        x = a
        if n > 1 then x = x * 256 + b end
        if n > 2 then x = x * 256 + c end
        if n > 3 then x = x * 256 + d end
        if n > 4 then x = x * 256 + e end
        if n > 5 then x = x * 256 + f end
        if n > 6 then x = x * 256 + g end
        for j = i + 8, i + n do
          x = x * 256 + byte(raw, j)
        end
      end
      r[tag] = int(x)
    elseif tag == ':' then
      local name, hv = string.match(string.sub(raw, i + 1, i + n), '^([^:]+):(.*)$')
      if name == nil then
        return nil
      end
      r[':' .. name] = hv
    else
      r[tag] = string.sub(raw, i + 1, i + n)
    end
    i = i + n + 1
  end
  if stop then
    return nil
  end
  return i
end

-- decode_final reads a record in the final form.
local function decode_final(raw)
  local byte, sub = string.byte, string.sub
  local mb, flags = byte(raw, 2, 3)
  if flags == nil then
    return nil
  end
  local r = {m = byte_meta(mb)}
  if r.m == nil then
    return nil
  end
  local v, i = uvar(raw, 4)
  if v == nil then
    return nil
  end
  r.w = int(v)
  r.q, r.f = sub(raw, i, i + 31), sub(raw, i + 32, i + 63)
  i = i + 64
  if flags % 2 == 1 then
    r.k = sub(raw, i, i + 15)
    i = i + 16
  end
  r.o = sub(raw, i, i + 7)
  v, i = uvar(raw, i + 8)
  if v == nil then
    return nil
  end
  r.n = int(v)
  v, i = uvar(raw, i)
  if v == nil then
    return nil
  end
  r.C = int(v)
  v, i = uvar(raw, i)
  if v == nil then
    return nil
  end
  r.F = int(v)
  local sc = byte(raw, i)
  if sc == nil then
    return nil
  end
  if sc > 0 then
    r.x = int(sc + 100)
  end
  local mc = math.floor(flags / 32)
  if mc > 0 then
    r.M = code_method(mc)
    if r.M == nil then
      return nil
    end
  end
  v, i = uvar(raw, i + 1)
  if v == nil then
    return nil
  end
  if v > 0 then
    r.H = sub(raw, i, i + v - 1)
  end
  v, i = uvar(raw, i + v)
  if v == nil then
    return nil
  end
  if v > 0 then
    r.P = sub(raw, i, i + v - 1)
  end
  i = fields(raw, i + v, r, true)
  if i == nil then
    return nil
  end
  if math.floor(flags / 2) % 2 == 1 then
    r.J = ''
  end
  if math.floor(flags / 4) % 2 == 1 then
    r.D = '1'
  end
  if i <= #raw then
    if math.floor(flags / 16) % 2 == 1 then
      v, i = uvar(raw, i)
      if v == nil then
        return nil
      end
      r.z = int(v)
    end
    r.B = sub(raw, i)
  end
  return r
end

local function decode(raw)
  local b = string.byte(raw, 1)
  if b == 3 then
    return decode_final(raw)
  end
  if b ~= 2 then
    return nil
  end
  local r = {}
  if fields(raw, 2, r, false) == nil then
    return nil
  end
  return r
end

-- load reads the record, or nil if there is none, whether it is of schema
-- 1 (a hash, which reads as the same table) and, for schema 2, the string
-- as stored.
local function load()
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' and raw.err then
    if redis.call('TYPE', key).ok ~= 'hash' then
      return error({err = 'ERR redisstore: the record is neither a string nor a hash'})
    end
    local all, r = redis.call('HGETALL', key), {}
    for i = 1, #all, 2 do
      r[all[i]] = all[i + 1]
    end
    r.v = nil
    return r, true
  end
  if not raw then
    return nil
  end
  local r = decode(raw)
  if r == nil then
    return error({err = 'ERR redisstore: record of an unknown schema or cut short'})
  end
  return r, false, raw
end

-- save writes the record whole, as schema 2. ttl (ms) sets its expiry; nil
-- keeps the one it has. It returns the record without its body (a reply
-- never carries the body the caller just sent).
local function save(r, ttl)
  local head = encode(r, false)
  -- One concatenation: a large body costs Lua a copy per string made.
  local full, body = head, r.B
  if body ~= nil and string.byte(head, 1) == 3 then
    full = head .. (r.z ~= nil and len_bytes(nat(r.z)) or '') .. body
  elseif body ~= nil then
    full = head .. (r.z ~= nil and field('z', uint_bytes(r.z)) or '') .. 'B' .. len_bytes(#body) .. body
  end
  if ttl == nil then
    redis.call('SET', key, full, 'KEEPTTL')
  else
    redis.call('SET', key, full, 'PX', ttl)
  end
  return head
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
local function put_sent(r, n, sent)
  if sent == n then
    r.s = nil
  else
    r.s = int(sent)
  end
end

-- with_state replaces the state byte of m.
local function with_state(m, s)
  return s .. string.sub(m, 2)
end

-- clear_result removes a stored result (status, body, headers, finalized).
local function clear_result(r)
  for f in pairs(r) do
    local c = string.sub(f, 1, 1)
    if c == 'x' or c == 'B' or c == 'D' or c == 'F' or c == 'z' or c == 'J' or c == ':' or (c >= '0' and c <= '9') then
      r[f] = nil
    end
  end
end

-- set_result stores the result that the arguments carry from ARGV[i] to the
-- last (a script's remaining arguments: the []string field of its
-- internal/scriptargs struct, whose local is i; the only ARGV a script
-- reads by index): status ('' if none), body dropped (0/1), body, its size
-- before compression ('' if stored as sent), then header field/value
-- pairs.
local function set_result(r, i)
  if ARGV[i] ~= '' then
    r.x = ARGV[i]
  end
  if ARGV[i + 1] == '1' then
    r.D = '1'
  end
  if ARGV[i + 2] ~= '' then
    r.B = ARGV[i + 2]
    if ARGV[i + 3] ~= '' then
      r.z = ARGV[i + 3]
    end
  end
  for j = i + 4, #ARGV, 2 do
    r[ARGV[j]] = ARGV[j + 1]
  end
end

-- tollgate: takes from token buckets, with exactly the arithmetic of
-- bucket.Limit.TakeAt (Go package github.com/tollgate/tollgate/bucket).
--
-- KEYS    the buckets of this call, each named once.
-- ARGV[1] the current time in Unix nanoseconds as a decimal integer (tests
--         on a fake clock: keys then expire FAKE_CLOCK_GRACE_MS late), or
--         the empty string to read the time from Redis TIME (production).
-- then four arguments per take, in order:
--         key index into KEYS (1-based), capacity, interval (whole
--         nanoseconds between two tokens), tokens. Negative tokens are a
--         write-back (Go: limiter/redis shadow.go): -tokens are charged
--         without a check, up to an empty bucket, and the take is allowed.
--
-- A bucket key holds its state, the instant in Unix nanoseconds at which it
-- is full again, as a decimal integer, and expires at that instant: an
-- absent key is a full bucket. A denied take or a take of 0 tokens writes
-- nothing.
--
-- Returns four integers per take: allowed (1 or 0), remaining tokens,
-- retry-after in ns (-1 when the take exceeds the capacity), reset-after
-- in ns.
--
-- Lua numbers are doubles, exact for integers below 2^53, and Unix
-- nanoseconds are about 1.8e18. So instants are split into seconds and
-- nanoseconds, and all arithmetic is on times relative to now, which the
-- caller keeps below 2^53 by refusing limits whose capacity x interval
-- exceeds 2^52 ns (about 52 days): a state is at most MAXREL ahead of now.

-- Library functions as locals: a local is a register, a global a table
-- lookup (two for redis.call) on every use.
local tonumber, type, fmod = tonumber, type, math.fmod
local find, sub, format = string.find, string.sub, string.format
local call, error_reply = redis.call, redis.error_reply

local E9 = 1000000000
-- The farthest a state may be ahead of now: 2^52 ns, the longest refill
-- window the store accepts (Go: redis.MaxWindow). The store never writes a
-- state farther ahead; one that is, is not the store's and is an error.
local MAXREL = 4503599627370496
-- Whole seconds ahead past which a state is surely farther than MAXREL;
-- up to it, ds * E9 + (ns - nsec) is exact and compared with MAXREL.
local MAXSEC = 4503600
-- With an explicit time (tests on a fake clock) keys are kept this many ms
-- longer than their state needs: the fake clock does not move with Redis's,
-- and an expiry on Redis's clock would reset a bucket the fake clock still
-- holds in debt. Decisions are the same either way: a state in the past
-- reads as a full bucket.
local FAKE_CLOCK_GRACE_MS = 60000

-- Truncated integer division, exact for integers below 2^53 in magnitude
-- (fmod is exact; the quotient of a multiple is exact).
local function div(a, b)
  return (a - fmod(a, b)) / b
end

-- Splits a decimal Unix-ns integer into seconds and nanoseconds.
local function split(v)
  if type(v) ~= 'string' or #v > 19 or not find(v, '^%d+$') then
    return nil
  end
  local l = #v
  if l <= 9 then
    return 0, tonumber(v)
  end
  return tonumber(sub(v, 1, l - 9)), tonumber(sub(v, l - 8))
end

local sec, nsec
local grace = 0
if ARGV[1] == '' then
  local t = call('TIME')
  sec, nsec = tonumber(t[1]), tonumber(t[2]) * 1000
else
  sec, nsec = split(ARGV[1])
  if sec == nil then
    return error_reply('ERR tollgate: bad time argument')
  end
  grace = FAKE_CLOCK_GRACE_MS
end

local rel = {}   -- per key index: state - now in ns, at least 0
local dirty = {} -- key indexes whose state changed
local out = {}

for i = 2, #ARGV, 4 do
  local k = tonumber(ARGV[i])
  local cap = tonumber(ARGV[i + 1])
  local iv = tonumber(ARGV[i + 2])
  local n = tonumber(ARGV[i + 3])
  if k == nil or KEYS[k] == nil or cap == nil or iv == nil or n == nil then
    return error_reply('ERR tollgate: bad take arguments')
  end
  local tat = rel[k]
  if tat == nil then
    tat = 0
    local v = call('GET', KEYS[k])
    if v then
      local s, ns = split(v)
      if s == nil then
        return error_reply('ERR tollgate: key ' .. KEYS[k] .. ' does not hold a bucket state')
      end
      local ds = s - sec
      if ds > MAXSEC then
        return error_reply('ERR tollgate: state of ' .. KEYS[k] .. ' is too far ahead of now')
      end
      if ds > -MAXSEC then
        tat = ds * E9 + (ns - nsec)
      end
      if tat > MAXREL then
        return error_reply('ERR tollgate: state of ' .. KEYS[k] .. ' is too far ahead of now')
      end
      if tat < 0 then
        tat = 0 -- full: tokens that arrived while full were discarded
      end
    end
    rel[k] = tat
  end
  local burst = cap * iv
  local d = #out
  -- whole tokens held now; negative only after a quota decrease: read as 0
  local held = div(burst - tat, iv)
  if held < 0 then
    held = 0
  end
  if n < 0 then
    -- A write-back: -n tokens a node admitted on its own while Redis did
    -- not answer, charged without a check, up to an empty bucket.
    local nxt = tat - n * iv
    if nxt > burst then
      nxt = burst
    end
    if nxt > tat then
      rel[k] = nxt
      dirty[k] = true
      tat = nxt
    end
    held = div(burst - tat, iv)
    if held < 0 then
      held = 0
    end
    out[d + 1], out[d + 2], out[d + 3], out[d + 4] = 1, held, 0, tat
  elseif n > cap then
    out[d + 1], out[d + 2], out[d + 3], out[d + 4] = 0, held, -1, tat
  elseif n == 0 then
    out[d + 1], out[d + 2], out[d + 3], out[d + 4] = 1, held, 0, tat
  else
    local nxt = tat + n * iv
    if nxt > burst then
      out[d + 1], out[d + 2], out[d + 3], out[d + 4] = 0, held, nxt - burst, tat
    else
      out[d + 1], out[d + 2], out[d + 3], out[d + 4] = 1, div(burst - nxt, iv), 0, nxt
      if n > 0 then
        rel[k] = nxt
        dirty[k] = true
      end
    end
  end
end

for k in pairs(dirty) do
  local r = rel[k]
  local total = nsec + r
  local carry = div(total, E9)
  local s, ns = sec + carry, total - carry * E9
  local v
  if s > 0 then
    v = format('%d%09d', s, ns)
  else
    v = format('%d', ns)
  end
  call('SET', KEYS[k], v, 'PX', div(r + 999999, 1000000) + grace)
end

return out

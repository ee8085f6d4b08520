-- The prelude: the loader puts this in front of every script, so what it defines is
-- written once. A script's own header names its KEYS and ARGV.

-- Redis's clock in microseconds: no two calls in this server ever see the same value.
local function clock_us()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

-- A new task token for a buffer: '<base>#<n>'. Tokens are Celery task ids and must never
-- repeat (a revoked id poisons reuse), even after the job is gone or Redis lost its
-- data, so n is the larger of the sheet's last seq + 1 and the clock.
local function mint_token(sheet_key, base, sheet_ttl_s)
  local seq = math.max(tonumber(redis.call('HGET', sheet_key, 'seq') or '0') + 1, clock_us())
  redis.call('HSET', sheet_key, 'seq', string.format('%d', seq))
  redis.call('EXPIRE', sheet_key, sheet_ttl_s)
  return base .. '#' .. string.format('%d', seq)
end

-- A flush task the caller must send, in the one shape every script returns it in:
-- {token, queue, countdown (ms), token it supersedes or ''}.
local function task_to_send(token, queue, countdown_ms, superseded)
  return {token, queue, countdown_ms, superseded or ''}
end

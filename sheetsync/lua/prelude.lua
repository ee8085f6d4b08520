-- The prelude: the loader (sheetsync/lua/contract.py) puts this in front of every
-- script, so what it defines is written once. A script's own header names its KEYS and
-- ARGV, as its Python declaration does.
--
-- Every time here is the Redis server's (TIME), never a host's: a worker or web host
-- whose clock is off cannot shorten a lease, move a due time or age a buffer.

-- Redis's clock in microseconds: no two calls in this server ever see the same value.
local function clock_us()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

-- Redis's clock in milliseconds.
local function now_ms()
  return math.floor(clock_us() / 1000)
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

-- Whether the run (token, epoch) still holds the job: its token is the job's, its
-- epoch the job's last claim, and the job is running. A second delivery of one token
-- claims a new epoch, so the first run fails this check at its next step (fencing).
local function held_by(job_key, token, epoch)
  local live_token, live_epoch, state = unpack(redis.call('HMGET', job_key, 'token', 'epoch',
    'state'))
  return live_token == token and live_epoch == epoch and state == 'running'
end

-- A buffer's arrival runs ('<ms>:<count>', oldest first) follow its list: every push
-- notes one, every trim drops as many ids from the head.
local function note_arrivals(times, at_ms, count)
  redis.call('RPUSH', times, string.format('%d:%d', at_ms, count))
end

local function drop_arrivals(times, count)
  while count > 0 do
    local head = redis.call('LINDEX', times, 0)
    if not head then
      return
    end
    local at, n = string.match(head, '^(%d+):(%d+)$')
    n = tonumber(n) or 0
    if n <= count then
      redis.call('LPOP', times)
      count = count - n
    else
      redis.call('LSET', times, 0, at .. ':' .. (n - count))
      count = 0
    end
  end
end

-- When the buffer's oldest id arrived (ms); `fallback` when nothing is noted.
local function oldest_arrival(times, fallback)
  local head = redis.call('LINDEX', times, 0)
  return head and tonumber(string.match(head, '^(%d+):')) or fallback
end

-- When the sweeper must look at this buffer's job next (the due index).
local function watch(due_index, base, at_ms)
  redis.call('ZADD', due_index, at_ms, base)
end

-- Push answer ids onto one or more buffers (the sheets one answer goes to) and make
-- sure each has exactly one live flush task. One call serves every target, so an emit
-- costs one round trip however many sheets the form is linked to.
-- KEYS[1] = buffer index, then per target: buf, job, sheet
-- ARGV[1] = now (ms), ARGV[2] = flush delay (ms), ARGV[3] = flush threshold,
-- ARGV[4] = sheet cache ttl (s), ARGV[5] = number of targets T,
-- ARGV[6 .. 5+2T] = buffer base and queue of each target, ARGV[6+2T ..] = answer ids
-- Returns one entry per target: {} when its live task already covers the ids, else
-- {token, countdown (ms), queue, superseded token or ""}: the caller sends the token.

-- Redis's clock in microseconds: no two scripts ever see the same value.
local function clock_us()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

local now, delay = tonumber(ARGV[1]), tonumber(ARGV[2])
local threshold, ttl, targets = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local first_id = 6 + 2 * targets

-- Tokens are task ids and must never repeat (a revoked id poisons reuse), even after
-- the job is gone or Redis lost its data: take the larger of seq+1 and the clock.
local function new_token(sheet, base)
  local seq = math.max(tonumber(redis.call('HGET', sheet, 'seq') or '0') + 1, clock_us())
  redis.call('HSET', sheet, 'seq', string.format('%d', seq))
  redis.call('EXPIRE', sheet, ttl)
  return base .. '#' .. string.format('%d', seq)
end

local results = {}
for t = 1, targets do
  local buf, job, sheet = KEYS[3 * t - 1], KEYS[3 * t], KEYS[3 * t + 1]
  local base, queue = ARGV[4 + 2 * t], ARGV[5 + 2 * t]
  local length = redis.call('RPUSH', buf, unpack(ARGV, first_id))
  local pushed = #ARGV - first_id + 1
  local state, promoted = 'scheduled', '1'
  -- A non-empty list always has its job (I1; the sweeper repairs it if not), so only
  -- a list that was empty, or one at the threshold, needs to look at the job.
  if length == pushed or length >= threshold then
    state, promoted = unpack(redis.call('HMGET', job, 'state', 'promoted'))
  end
  local result = {}
  if state == 'scheduled' and promoted ~= '1' and length >= threshold then
    -- Promotion (I3): the list reached the threshold while a delayed task waits.
    local old_token, job_queue = unpack(redis.call('HMGET', job, 'token', 'queue'))
    local token = new_token(sheet, base)
    redis.call('HSET', job, 'token', token, 'promoted', '1', 'due_at', now)
    result = {token, 0, job_queue, old_token}
  elseif not state then
    local token = new_token(sheet, base)
    local countdown, promote = delay, '0'
    if length >= threshold then
      countdown, promote = 0, '1'
    end
    redis.call('HSET', job, 'token', token, 'state', 'scheduled', 'promoted', promote,
      'queue', queue, 'due_at', now + countdown, 'attempts', 0)
    -- Indexed while the job lives (finish and the sweeper remove it).
    redis.call('ZADD', KEYS[1], 'NX', now, base)
    result = {token, countdown, queue, ''}
  end
  -- A running job needs nothing: the running loop drains the new ids.
  results[t] = result
end
return results

-- Push answer ids onto a buffer and make sure exactly one flush task is live for it.
-- KEYS[1] = buf, KEYS[2] = job, KEYS[3] = sheet, KEYS[4] = buffer index
-- ARGV[1] = buffer base, ARGV[2] = now (ms), ARGV[3] = flush delay (ms),
-- ARGV[4] = flush threshold, ARGV[5] = queue, ARGV[6] = sheet cache ttl (s),
-- ARGV[7..] = answer ids
-- Returns {} when the live task already covers the ids, else
-- {token, countdown (ms), queue, superseded token or ""}: the caller sends the token.

-- Redis's clock in microseconds: no two scripts ever see the same value.
local function clock_us()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

local base, now = ARGV[1], tonumber(ARGV[2])
local delay, threshold = tonumber(ARGV[3]), tonumber(ARGV[4])

local length = redis.call('RPUSH', KEYS[1], unpack(ARGV, 7))
redis.call('ZADD', KEYS[4], 'NX', now, base)

local job = redis.call('HMGET', KEYS[2], 'state', 'promoted', 'token', 'queue')
local state, promoted, old_token, queue = job[1], job[2], job[3], job[4]
if state == 'running' then
  return {}
end
if state == 'scheduled' and (promoted == '1' or length < threshold) then
  return {}
end

-- Tokens are task ids and must never repeat (a revoked id poisons reuse), even after
-- the job is gone or Redis lost its data: take the larger of seq+1 and the clock.
local seq = math.max(tonumber(redis.call('HGET', KEYS[3], 'seq') or '0') + 1, clock_us())
redis.call('HSET', KEYS[3], 'seq', string.format('%d', seq))
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[6]))
local token = base .. '#' .. string.format('%d', seq)

if state == 'scheduled' then
  -- Promotion (I3): the list reached the threshold while a delayed task waits.
  redis.call('HSET', KEYS[2], 'token', token, 'promoted', '1', 'due_at', now)
  return {token, 0, queue, old_token}
end

local countdown, promote = delay, '0'
if length >= threshold then
  countdown, promote = 0, '1'
end
queue = ARGV[5]
redis.call('HSET', KEYS[2], 'token', token, 'state', 'scheduled', 'promoted', promote,
  'queue', queue, 'due_at', now + countdown, 'attempts', 0)
return {token, countdown, queue, ''}

-- A run ends: delete the job if the list is empty, else hand the buffer to a new task.
-- KEYS[1] = buf, KEYS[2] = job, KEYS[3] = sheet, KEYS[4] = buffer index
-- ARGV[1] = token, ARGV[2] = now (ms), ARGV[3] = flush delay (ms),
-- ARGV[4] = flush threshold, ARGV[5] = buffer base, ARGV[6] = sheet cache ttl (s),
-- ARGV[7] = forced countdown (ms) when rescheduling on purpose (rate limit), else -1
-- Returns {} when this run no longer held the buffer, {"done"} when the job is gone,
-- or {"again", token, countdown (ms), queue}: the caller sends the new token.

-- Redis's clock in microseconds: no two scripts ever see the same value.
local function clock_us()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

local job = redis.call('HMGET', KEYS[2], 'token', 'state', 'queue')
if job[1] ~= ARGV[1] or job[2] ~= 'running' then
  return {}
end
local now, forced = tonumber(ARGV[2]), tonumber(ARGV[7])
local length = redis.call('LLEN', KEYS[1])
if length == 0 then
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[4], ARGV[5])
  return {'done'}
end

local countdown, promote = tonumber(ARGV[3]), '0'
if length >= tonumber(ARGV[4]) then
  countdown, promote = 0, '1'
end
if forced >= 0 then
  countdown = forced
end
local seq = math.max(tonumber(redis.call('HGET', KEYS[3], 'seq') or '0') + 1, clock_us())
redis.call('HSET', KEYS[3], 'seq', string.format('%d', seq))
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[6]))
local token = ARGV[5] .. '#' .. string.format('%d', seq)
redis.call('HSET', KEYS[2], 'token', token, 'state', 'scheduled', 'promoted', promote,
  'due_at', now + countdown)
redis.call('HDEL', KEYS[2], 'lease_until')
return {'again', token, countdown, job[3]}

-- A flush task starts: take the buffer if the task's token is still the live one (I2).
-- KEYS[1] = job
-- ARGV[1] = token, ARGV[2] = now (ms), ARGV[3] = lease (ms)
-- Returns 1 when this run now holds the buffer; 0 when the token was superseded or
-- another run with this token still holds an unexpired lease (a duplicate delivery).
local job = redis.call('HMGET', KEYS[1], 'token', 'state', 'lease_until')
local now = tonumber(ARGV[2])
if job[1] ~= ARGV[1] then
  return 0
end
if job[2] == 'running' and tonumber(job[3] or '0') > now then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'running', 'lease_until', now + tonumber(ARGV[3]))
return 1

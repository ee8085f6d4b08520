-- A flush task starts: take the buffer if the task's token is still the live one.
-- KEYS: the job
-- ARGV: token, now (ms), lease (ms)
-- Returns 1 when this run now holds the buffer; 0 when the token was superseded or
-- another run with this token still holds an unexpired lease (a duplicate delivery).
local job = KEYS[1]
local token, now, lease_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local live_token, state, lease_until = unpack(redis.call('HMGET', job, 'token', 'state',
  'lease_until'))
if live_token ~= token then
  return 0
end
if state == 'running' and tonumber(lease_until or '0') > now then
  return 0
end
redis.call('HSET', job, 'state', 'running', 'lease_until', now + lease_ms)
return 1

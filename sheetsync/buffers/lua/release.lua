-- A run hit a transient error: keep the token (Celery retries the same task id) and
-- mark the job scheduled again, so the sweeper knows when the retry is due.
-- KEYS: the job
-- ARGV: token, due at (ms)
-- Returns the attempts so far including this one, or -1 when this run no longer held
-- the buffer.
local job = KEYS[1]
local token, due_at = ARGV[1], ARGV[2]
local live_token, state = unpack(redis.call('HMGET', job, 'token', 'state'))
if live_token ~= token or state ~= 'running' then
  return -1
end
redis.call('HSET', job, 'state', 'scheduled', 'due_at', due_at)
redis.call('HDEL', job, 'lease_until')
return redis.call('HINCRBY', job, 'attempts', 1)

-- A run hit a transient error: keep the token (Celery retries the same task id) and
-- mark the job scheduled again, so the sweeper knows when the retry is due.
-- KEYS[1] = job
-- ARGV[1] = token, ARGV[2] = due at (ms)
-- Returns the attempts so far including this one, or -1 when this run no longer held
-- the buffer.
local job = redis.call('HMGET', KEYS[1], 'token', 'state')
if job[1] ~= ARGV[1] or job[2] ~= 'running' then
  return -1
end
redis.call('HSET', KEYS[1], 'state', 'scheduled', 'due_at', ARGV[2])
redis.call('HDEL', KEYS[1], 'lease_until')
return redis.call('HINCRBY', KEYS[1], 'attempts', 1)

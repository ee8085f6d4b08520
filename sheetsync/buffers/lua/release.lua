-- A run hit a transient error: keep the token (Celery retries the same task id) and
-- mark the job scheduled again, so the sweeper knows when the retry is due. The worker
-- publishes the retry itself, so the job counts as sent.
-- KEYS: the job, the due index
-- ARGV: token, epoch, delay (ms), buffer base, sweep grace (ms)
-- Returns the attempts so far including this one, or -1 when this run no longer held
-- the buffer.
local job, due_index = KEYS[1], KEYS[2]
local token, epoch, delay_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local base, grace_ms = ARGV[4], tonumber(ARGV[5])
if not held_by(job, token, epoch) then
  return -1
end
local due_at = now_ms() + delay_ms
redis.call('HSET', job, 'state', 'scheduled', 'due_at', due_at, 'sent', '1')
redis.call('HDEL', job, 'lease_until')
watch(due_index, base, due_at + grace_ms)
return redis.call('HINCRBY', job, 'attempts', 1)

-- A run hit a transient error: keep the token (Celery retries the same task id) and
-- mark the job scheduled again, so the sweeper knows when the retry is due. The worker
-- publishes the retry itself, so the job counts as sent.
-- Returns the attempts so far including this one, or -1 when this run no longer held
-- the buffer.
local job = KEYS[1]                -- the job
local due_index = KEYS[2]          -- the due index
local token = ARGV[1]              -- the run's token
local epoch = ARGV[2]              -- the run's epoch
local delay_ms = tonumber(ARGV[3]) -- delay before the retry (ms)
local base = ARGV[4]               -- buffer base
local grace_ms = tonumber(ARGV[5]) -- sweep grace (ms)
if not held_by(job, token, epoch) then
  return -1
end
local due_at = now_ms() + delay_ms
redis.call('HSET', job, 'state', 'scheduled', 'due_at', due_at, 'sent', '1')
redis.call('HDEL', job, 'lease_until')
watch(due_index, base, due_at + grace_ms)
return redis.call('HINCRBY', job, 'attempts', 1)

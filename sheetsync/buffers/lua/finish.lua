-- A run ends: delete the job if the list is empty, else hand the buffer to a new task
-- (I1: the length is checked in the same script, so no wake-up is lost). The next task
-- is due FLUSH_DELAY after the oldest id left arrived (at once if that has passed, or
-- the list is at the threshold), unless the run asks for a countdown of its own.
-- KEYS: the list, the job, the sheet cache, the buffer index, the arrival runs, the due
--       index
-- ARGV: token, epoch, flush delay (ms), flush threshold, buffer base, sheet cache ttl (s),
--       countdown (ms) forced when rescheduling on purpose (a rate limit) or -1, sweep
--       grace (ms), '1' to hold: no promotion at the threshold before the forced
--       countdown (a run waiting for a fuller batch)
-- Returns the task to send (as a list of one), or none: the job is done, or this run
-- no longer held the buffer.
local list, job, sheet, buffer_index = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local times, due_index = KEYS[5], KEYS[6]
local token, epoch, delay_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local threshold, base, sheet_ttl_s = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local forced_ms, grace_ms, hold = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9] == '1'
if not held_by(job, token, epoch) then
  return {}
end
local queue = redis.call('HGET', job, 'queue')
local length = redis.call('LLEN', list)
if length == 0 then
  redis.call('DEL', job, times)
  redis.call('ZREM', buffer_index, base)
  redis.call('ZREM', due_index, base)
  return {}
end
local now = now_ms()
local countdown_ms = math.max(0, oldest_arrival(times, now) + delay_ms - now)
local promote = '0'
if length >= threshold then
  countdown_ms, promote = 0, '1'
end
if forced_ms >= 0 then
  countdown_ms = forced_ms
end
if hold then
  promote = '1'
end
local next_token = mint_token(sheet, base, sheet_ttl_s)
redis.call('HSET', job, 'token', next_token, 'state', 'scheduled', 'promoted', promote,
  'due_at', now + countdown_ms)
redis.call('HDEL', job, 'lease_until', 'sent')
watch(due_index, base, now + countdown_ms + grace_ms)
return {task_to_send(next_token, queue, countdown_ms)}

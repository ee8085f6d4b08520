-- A run ends: delete the job if the list is empty, else hand the buffer to a new task
-- (I1: the length is checked in the same script, so no wake-up is lost). The next task
-- is due FLUSH_DELAY after the oldest id left arrived (at once if that has passed, or
-- the list is at the threshold), unless the run asks for a countdown of its own.
-- Returns the task to send (as a list of one), or none: the job is done, or this run
-- no longer held the buffer.
local buffer = KEYS[1]                -- the list of ids
local job = KEYS[2]                   -- its job
local sheet = KEYS[3]                 -- its sheet cache
local buffer_index = KEYS[4]          -- the buffer index
local times = KEYS[5]                 -- its arrival runs
local due_index = KEYS[6]             -- the due index
local token = ARGV[1]                 -- the run's token
local epoch = ARGV[2]                 -- the run's epoch
local delay_ms = tonumber(ARGV[3])    -- flush delay (ms)
local threshold = tonumber(ARGV[4])   -- flush threshold
local base = ARGV[5]                  -- buffer base
local sheet_ttl_s = tonumber(ARGV[6]) -- sheet cache ttl (s)
local forced_ms = tonumber(ARGV[7])   -- countdown (ms) forced when rescheduling on
                                      -- purpose (a rate limit), or -1
local grace_ms = tonumber(ARGV[8])    -- sweep grace (ms)
local hold = ARGV[9] == '1'           -- no promotion at the threshold before the forced
                                      -- countdown (a run waiting for a fuller batch)
if not held_by(job, token, epoch) then
  return {}
end
local queue = redis.call('HGET', job, 'queue')
local length = redis.call('LLEN', buffer)
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

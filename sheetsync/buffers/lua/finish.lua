-- A run ends: delete the job if the list is empty, else hand the buffer to a new task.
-- KEYS: the list, the job, the sheet cache, the buffer index
-- ARGV: token, now (ms), flush delay (ms), flush threshold, buffer base, sheet cache
--       ttl (s), countdown (ms) forced when rescheduling on purpose (a rate limit) or -1
-- Returns the task to send (as a list of one), or none: the job is done, or this run
-- no longer held the buffer.
local list, job, sheet, buffer_index = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, now, delay_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local threshold, base, sheet_ttl_s = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local forced_ms = tonumber(ARGV[7])
local live_token, state, queue = unpack(redis.call('HMGET', job, 'token', 'state', 'queue'))
if live_token ~= token or state ~= 'running' then
  return {}
end
local length = redis.call('LLEN', list)
if length == 0 then
  redis.call('DEL', job)
  redis.call('ZREM', buffer_index, base)
  return {}
end
local countdown_ms, promote = delay_ms, '0'
if length >= threshold then
  countdown_ms, promote = 0, '1'
end
if forced_ms >= 0 then
  countdown_ms = forced_ms
end
local next_token = mint_token(sheet, base, sheet_ttl_s)
redis.call('HSET', job, 'token', next_token, 'state', 'scheduled', 'promoted', promote,
  'due_at', now + countdown_ms)
redis.call('HDEL', job, 'lease_until')
return {task_to_send(next_token, queue, countdown_ms)}

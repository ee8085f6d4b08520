-- A buffer must be flushed now: by the caller itself (`dlq replay --now`), or because
-- an append's intent is left open and nothing would resolve it (the reconciler). Give
-- its scheduled job (or a buffer that has no job) a new token due now. A running job is
-- left to its run.
-- KEYS: the list, the job, the sheet cache, the buffer index, the arrival runs, the due
--       index
-- ARGV: buffer base, queue for a job that has none, sheet cache ttl (s), '1' to make a
--       job even for an empty list (its run resolves open intents, then ends), sweep
--       grace (ms)
-- Returns the task (as a list of one) for the new token, superseding the job's old one,
-- or none: the buffer is empty (and not forced), or a run holds it.
local list, job, sheet, buffer_index = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local times, due_index = KEYS[5], KEYS[6]
local base, default_queue, sheet_ttl_s = ARGV[1], ARGV[2], tonumber(ARGV[3])
local even_empty, grace_ms = ARGV[4] == '1', tonumber(ARGV[5])
local state, old_token, queue = unpack(redis.call('HMGET', job, 'state', 'token', 'queue'))
if state == 'running' or (not state and not even_empty and redis.call('LLEN', list) == 0) then
  return {}
end
local now = now_ms()
local token = mint_token(sheet, base, sheet_ttl_s)
queue = queue or default_queue
redis.call('HSET', job, 'token', token, 'state', 'scheduled', 'promoted', '0', 'queue', queue,
  'due_at', now)
redis.call('HDEL', job, 'sent')
redis.call('ZADD', buffer_index, 'NX', oldest_arrival(times, now), base)
watch(due_index, base, now + grace_ms)
return {task_to_send(token, queue, 0, old_token)}

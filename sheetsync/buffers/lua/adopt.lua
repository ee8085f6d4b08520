-- A buffer must be flushed now: by the caller itself (`dlq replay --now`), or because
-- an append's intent is left open and nothing would resolve it (the reconciler). Give
-- its scheduled job (or a buffer that has no job) a new token due now. A running job is
-- left to its run.
-- Returns the task (as a list of one) for the new token, superseding the job's old one,
-- or none: the buffer is empty (and not forced), or a run holds it.
local buffer = KEYS[1]                -- the list of ids
local job = KEYS[2]                   -- its job
local sheet = KEYS[3]                 -- its sheet cache
local buffer_index = KEYS[4]          -- the buffer index
local times = KEYS[5]                 -- its arrival runs
local due_index = KEYS[6]             -- the due index
local base = ARGV[1]                  -- buffer base
local default_queue = ARGV[2]         -- queue for a job that has none
local sheet_ttl_s = tonumber(ARGV[3]) -- sheet cache ttl (s)
local even_empty = ARGV[4] == '1'     -- make a job even for an empty list (its run
                                      -- resolves open intents, then ends)
local grace_ms = tonumber(ARGV[5])    -- sweep grace (ms)
local state, old_token, queue = unpack(redis.call('HMGET', job, 'state', 'token', 'queue'))
if state == 'running' or (not state and not even_empty and redis.call('LLEN', buffer) == 0) then
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

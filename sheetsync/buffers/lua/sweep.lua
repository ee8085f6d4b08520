-- The sweeper's repair of a chunk of buffers. A job scheduled long past due (its task
-- was never sent, or was lost), a running job whose lease expired (its worker died), or
-- a non-empty list with no job at all gets a new token; an empty buffer with no job
-- leaves the index.
-- KEYS: the buffer index, then per buffer: its list, its job, its sheet cache
-- ARGV: now (ms), grace past due (ms), queue for a job that has none, sheet cache
--       ttl (s), then each buffer's base
-- Returns the tasks to send, each superseding the job's old token.
local buffer_index = KEYS[1]
local now, grace_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local default_queue, sheet_ttl_s = ARGV[3], tonumber(ARGV[4])

local function stuck(state, due_at, lease_until, length)
  if not state then
    return length > 0
  elseif state == 'scheduled' then
    return tonumber(due_at or '0') + grace_ms <= now
  end
  return tonumber(lease_until or '0') <= now
end

local to_send = {}
for b = 1, #ARGV - 4 do
  local list, job, sheet = KEYS[3 * b - 1], KEYS[3 * b], KEYS[3 * b + 1]
  local base = ARGV[4 + b]
  local state, old_token, due_at, lease_until, queue = unpack(redis.call('HMGET', job,
    'state', 'token', 'due_at', 'lease_until', 'queue'))
  local length = redis.call('LLEN', list)
  if not state and length == 0 then
    redis.call('ZREM', buffer_index, base)
  elseif stuck(state, due_at, lease_until, length) then
    local token = mint_token(sheet, base, sheet_ttl_s)
    queue = queue or default_queue
    redis.call('HSET', job, 'token', token, 'state', 'scheduled', 'promoted', '0',
      'queue', queue, 'due_at', now)
    redis.call('HDEL', job, 'lease_until')
    redis.call('ZADD', buffer_index, 'NX', now, base)
    to_send[#to_send + 1] = task_to_send(token, queue, 0, old_token)
  end
end
return to_send

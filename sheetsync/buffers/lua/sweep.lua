-- The sweeper's repair of a chunk of buffers (I1). A job scheduled past due + grace (its
-- task was never sent, or was lost), a running job whose lease expired (its worker died),
-- or a non-empty list with no job at all gets a new token; an empty buffer with no job
-- leaves the indexes. A job whose task was sent to a queue that still has messages
-- waiting for a worker is late because workers are busy, not lost: it is looked at
-- again later, up to the long grace, so busy workers cause no re-sends. A job that is
-- not stuck is scored again in the due index.
-- Returns the tasks to send, each superseding the job's old token.
local buffer_index = KEYS[1]              -- the buffer index
local due_index = KEYS[2]                 -- the due index
-- KEYS[3..] each of buffers: buffer, job, sheet, times (its list, job, sheet cache and
--           arrival runs)
local grace_ms = tonumber(ARGV[1])        -- grace past due (ms)
local queued_grace_ms = tonumber(ARGV[2]) -- grace past due for a sent task in a busy
                                          -- queue (ms)
local default_queue = ARGV[3]             -- queue for a job that has none
local sheet_ttl_s = tonumber(ARGV[4])     -- sheet cache ttl (s)
local busy_queues = ARGV[5]               -- queues with messages waiting, comma-separated
-- ARGV[6..] each of buffers: base (its buffer base)
local busy = {}
for queue in string.gmatch(busy_queues, '[^,]+') do
  busy[queue] = true
end
local now = now_ms()

-- When the job must be looked at again (nil: a list with no job; now or before: stuck).
local function look_again_at(state, due_at, lease_until, sent, queue)
  if state == 'scheduled' then
    local overdue_at = tonumber(due_at or '0') + grace_ms
    if overdue_at <= now and sent == '1' and busy[queue]
        and now < tonumber(due_at or '0') + queued_grace_ms then
      return now + grace_ms  -- waiting in a busy queue
    end
    return overdue_at
  elseif state == 'running' then
    return tonumber(lease_until or '0')
  end
  return nil
end

local to_send = {}
for b = 1, #ARGV - 5 do
  local buffer, job, sheet, times = KEYS[4 * b - 1], KEYS[4 * b], KEYS[4 * b + 1], KEYS[4 * b + 2]
  local base = ARGV[5 + b]
  local state, old_token, due_at, lease_until, queue, sent = unpack(redis.call('HMGET', job,
    'state', 'token', 'due_at', 'lease_until', 'queue', 'sent'))
  local length = redis.call('LLEN', buffer)
  local at = look_again_at(state, due_at, lease_until, sent, queue)
  if not state and length == 0 then
    redis.call('ZREM', buffer_index, base)
    redis.call('ZREM', due_index, base)
    redis.call('DEL', times)
  elseif at == nil or at <= now then
    local token = mint_token(sheet, base, sheet_ttl_s)
    queue = queue or default_queue
    redis.call('HSET', job, 'token', token, 'state', 'scheduled', 'promoted', '0',
      'queue', queue, 'due_at', now)
    redis.call('HDEL', job, 'lease_until', 'sent')
    redis.call('ZADD', buffer_index, 'NX', oldest_arrival(times, now), base)
    watch(due_index, base, now + grace_ms)
    to_send[#to_send + 1] = task_to_send(token, queue, 0, old_token)
  else
    watch(due_index, base, at)
  end
end
return to_send

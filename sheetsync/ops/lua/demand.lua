-- Read only: where each buffer's flush stands and what the quota can feed now, for the
-- demand on worker processes (sheetsync/ops/demand.py). It changes nothing: a window's
-- old entries are counted out, not removed.
-- Returns {the project's write slots free, the runs waiting at the quota, then each
-- account's write slots free, then per buffer: its state, its ids, its queue}.
-- A run waits when it holds a turn, queued or parked, at the write queue or the read
-- queue (counted once). A buffer's state is 'running' (a run holds an unexpired lease),
-- 'due' (a flush may start now: its job is scheduled and due, its lease ran out, or it
-- has ids and no job for the sweeper to mend), 'waiting' (scheduled for later: the
-- debounce, a retry's backoff, a turn at the quota told to come back) or 'idle' (no ids
-- and no run).
local project_window = KEYS[1]          -- the project's write window
local write_queue = KEYS[2]             -- the write queue's turns waiting
local write_parked = KEYS[3]            -- the write queue's turns parked
local read_queue = KEYS[4]              -- the read queue's turns waiting
local read_parked = KEYS[5]             -- the read queue's turns parked
-- KEYS[6..] each of accounts: window (an account's write window)
-- KEYS[6+A..] each of buffers: buffer, job (a buffer's list and job)
local window_ms = tonumber(ARGV[1])     -- window (ms)
local project_limit = tonumber(ARGV[2]) -- writes per window, per project
local account_limit = tonumber(ARGV[3]) -- writes per window, per account
local account_count = tonumber(ARGV[4]) -- A: how many accounts' windows the KEYS hold
local now = now_ms()
local since = '(' .. (now - window_ms)

local function free(window, limit)
  return math.max(limit - redis.call('ZCOUNT', window, since, '+inf'), 0)
end

local waiting = redis.call('ZCARD', write_queue) + redis.call('ZCARD', write_parked)
for _, side in ipairs({read_queue, read_parked}) do
  for _, name in ipairs(redis.call('ZRANGE', side, 0, -1)) do
    if not redis.call('ZSCORE', write_queue, name) and not redis.call('ZSCORE', write_parked,
        name) then
      waiting = waiting + 1
    end
  end
end

local reply = {free(project_window, project_limit), waiting}
for a = 6, 5 + account_count do
  reply[#reply + 1] = free(KEYS[a], account_limit)
end

for b = 6 + account_count, #KEYS, 2 do
  local ids = redis.call('LLEN', KEYS[b])
  local state, due_at, lease_until, queue = unpack(redis.call('HMGET', KEYS[b + 1], 'state',
    'due_at', 'lease_until', 'queue'))
  local where = 'due'
  if state == 'running' and tonumber(lease_until or '0') > now then
    where = 'running'
  elseif ids == 0 then
    where = 'idle'
  elseif state == 'scheduled' and tonumber(due_at or '0') > now then
    where = 'waiting'
  end
  reply[#reply + 1] = where
  reply[#reply + 1] = ids
  reply[#reply + 1] = queue or ''
end
return reply

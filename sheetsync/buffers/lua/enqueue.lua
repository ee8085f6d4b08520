-- Push answer ids onto one or more buffers (the sheets one answer goes to) and make
-- sure each has exactly one live flush task. One call serves every target, so an emit
-- costs one round trip however many sheets the form is linked to.
-- Returns the tasks to send (see task_to_send): a target whose live task already
-- covers its new ids needs none.
local buffer_index = KEYS[1]          -- the buffer index
local due_index = KEYS[2]             -- the due index
-- KEYS[3..] each of targets: buffer, job, sheet, times (its list, job, sheet cache and
--           arrival runs)
local delay_ms = tonumber(ARGV[1])    -- flush delay (ms)
local threshold = tonumber(ARGV[2])   -- flush threshold
local sheet_ttl_s = tonumber(ARGV[3]) -- sheet cache ttl (s)
local grace_ms = tonumber(ARGV[4])    -- sweep grace (ms)
-- ARGV[5..] each of targets: base, queue (its buffer base and queue)
-- ARGV[5+2T..] ids: the answer ids
local targets = (#KEYS - 2) / 4
local first_id = 5 + 2 * targets
local pushed = #ARGV - first_id + 1
local now = now_ms()

local to_send = {}
for t = 1, targets do
  local buffer, job, sheet, times = KEYS[4 * t - 1], KEYS[4 * t], KEYS[4 * t + 1], KEYS[4 * t + 2]
  local base, queue = ARGV[3 + 2 * t], ARGV[4 + 2 * t]
  local length = redis.call('RPUSH', buffer, unpack(ARGV, first_id))
  note_arrivals(times, now, pushed)
  local state, promoted = 'scheduled', '1'
  -- A non-empty list always has its job (I1; the sweeper repairs it if not), so only a
  -- list that was empty, or one at the threshold, needs to look at the job.
  if length == pushed or length >= threshold then
    state, promoted = unpack(redis.call('HMGET', job, 'state', 'promoted'))
  end
  if state == 'scheduled' and promoted ~= '1' and length >= threshold then
    -- Promotion (I3): the list reached the threshold while a delayed task waits.
    local old_token, job_queue = unpack(redis.call('HMGET', job, 'token', 'queue'))
    local token = mint_token(sheet, base, sheet_ttl_s)
    redis.call('HSET', job, 'token', token, 'promoted', '1', 'due_at', now)
    redis.call('HDEL', job, 'sent')
    watch(due_index, base, now + grace_ms)
    to_send[#to_send + 1] = task_to_send(token, job_queue, 0, old_token)
  elseif not state then
    local token = mint_token(sheet, base, sheet_ttl_s)
    local countdown_ms, promote = delay_ms, '0'
    if length >= threshold then
      countdown_ms, promote = 0, '1'
    end
    redis.call('HSET', job, 'token', token, 'state', 'scheduled', 'promoted', promote,
      'queue', queue, 'due_at', now + countdown_ms, 'attempts', 0)
    -- Indexed while the job lives (finish and the sweeper remove it).
    redis.call('ZADD', buffer_index, 'NX', oldest_arrival(times, now), base)
    watch(due_index, base, now + countdown_ms + grace_ms)
    to_send[#to_send + 1] = task_to_send(token, queue, countdown_ms)
  end
  -- A running job needs nothing: the running loop drains the new ids.
end
return to_send

-- A batch is settled (COMPLETED, dead-lettered or failed in the DB): drop it from the
-- head of the list (and its arrival runs) and remember where the sheet ends.
-- Returns {ids left, age of the oldest id left (ms)}, or {-1, 0} when this run no
-- longer holds the buffer.
local buffer = KEYS[1]                -- the list of ids
local job = KEYS[2]                   -- its job
local sheet = KEYS[3]                 -- its sheet cache
local buffer_index = KEYS[4]          -- the buffer index
local times = KEYS[5]                 -- its arrival runs
local due_index = KEYS[6]             -- the due index
local token = ARGV[1]                 -- the run's token
local epoch = ARGV[2]                 -- the run's epoch
local lease_ms = tonumber(ARGV[3])    -- lease (ms)
local count = tonumber(ARGV[4])       -- batch length
local last_row = ARGV[5]              -- last row now in the sheet: '' when unchanged
                                      -- (KEEP_LAST_ROW), '-' to forget it (FORGET_LAST_ROW)
local base = ARGV[6]                  -- buffer base
local sheet_ttl_s = tonumber(ARGV[7]) -- sheet cache ttl (s)
if not held_by(job, token, epoch) then
  return {-1, 0}
end
local now = now_ms()
redis.call('LTRIM', buffer, count, -1)
drop_arrivals(times, count)
if last_row == '-' then
  redis.call('HDEL', sheet, 'last_row')
elseif last_row ~= '' then
  redis.call('HSET', sheet, 'last_row', last_row)
end
redis.call('EXPIRE', sheet, sheet_ttl_s)
redis.call('HSET', job, 'lease_until', now + lease_ms)
watch(due_index, base, now + lease_ms)
if count > 0 then
  -- Progress: the next transient failure starts a fresh run of retries.
  redis.call('HSET', job, 'attempts', 0)
end
local left = redis.call('LLEN', buffer)
if left == 0 then
  redis.call('DEL', times)
  return {0, 0}
end
local oldest = oldest_arrival(times, now)
redis.call('ZADD', buffer_index, 'XX', oldest, base)
return {left, now - oldest}

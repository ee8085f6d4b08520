-- A batch is settled (COMPLETED, dead-lettered or failed in the DB): drop it from the
-- head of the list (and its arrival runs) and remember where the sheet ends.
-- KEYS: the list, the job, the sheet cache, the buffer index, the arrival runs, the due
--       index
-- ARGV: token, epoch, lease (ms), batch length, last row now in the sheet ('' when
--       unknown, '-' when it must be forgotten), buffer base, sheet cache ttl (s)
-- Returns {ids left, age of the oldest id left (ms)}, or {-1, 0} when this run no
-- longer holds the buffer.
local list, job, sheet, buffer_index = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local times, due_index = KEYS[5], KEYS[6]
local token, epoch, lease_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local count, last_row, base, sheet_ttl_s = tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7])
if not held_by(job, token, epoch) then
  return {-1, 0}
end
local now = now_ms()
redis.call('LTRIM', list, count, -1)
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
local left = redis.call('LLEN', list)
if left == 0 then
  redis.call('DEL', times)
  return {0, 0}
end
local oldest = oldest_arrival(times, now)
redis.call('ZADD', buffer_index, 'XX', oldest, base)
return {left, now - oldest}

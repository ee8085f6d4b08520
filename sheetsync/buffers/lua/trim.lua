-- A batch is settled (COMPLETED, dead-lettered or failed in the DB): drop it from the
-- head of the list, clear the intent and remember where the sheet ends.
-- KEYS[1] = buf, KEYS[2] = job, KEYS[3] = inflight, KEYS[4] = sheet, KEYS[5] = buffer index
-- ARGV[1] = token, ARGV[2] = now (ms), ARGV[3] = lease (ms), ARGV[4] = batch length,
-- ARGV[5] = last row now in the sheet, or "" if unchanged, ARGV[6] = buffer base,
-- ARGV[7] = sheet cache ttl (s)
-- Returns the ids left in the list, or -1 when this run no longer holds the buffer.
local job = redis.call('HMGET', KEYS[2], 'token', 'state')
if job[1] ~= ARGV[1] or job[2] ~= 'running' then
  return -1
end
local now = tonumber(ARGV[2])
redis.call('LTRIM', KEYS[1], tonumber(ARGV[4]), -1)
redis.call('DEL', KEYS[3])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[4], 'last_row', ARGV[5])
end
redis.call('EXPIRE', KEYS[4], tonumber(ARGV[7]))
redis.call('HSET', KEYS[2], 'lease_until', now + tonumber(ARGV[3]))
if tonumber(ARGV[4]) > 0 then
  -- Progress: the next transient failure starts a fresh run of retries.
  redis.call('HSET', KEYS[2], 'attempts', 0)
end
local left = redis.call('LLEN', KEYS[1])
if left > 0 then
  -- The head is now younger than before; "now" is a close upper bound of its age.
  redis.call('ZADD', KEYS[5], 'XX', now, ARGV[6])
end
return left

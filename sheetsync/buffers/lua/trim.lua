-- A batch is settled (COMPLETED, dead-lettered or failed in the DB): drop it from the
-- head of the list, clear the intent and remember where the sheet ends.
-- KEYS: the list, the job, the intent, the sheet cache, the buffer index
-- ARGV: token, now (ms), lease (ms), batch length, last row now in the sheet ('' when
--       unchanged), buffer base, sheet cache ttl (s)
-- Returns the ids left in the list, or -1 when this run no longer holds the buffer.
local list, job, intent, sheet, buffer_index = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, now, lease_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local count, last_row, base, sheet_ttl_s = tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7])
local live_token, state = unpack(redis.call('HMGET', job, 'token', 'state'))
if live_token ~= token or state ~= 'running' then
  return -1
end
redis.call('LTRIM', list, count, -1)
redis.call('DEL', intent)
if last_row ~= '' then
  redis.call('HSET', sheet, 'last_row', last_row)
end
redis.call('EXPIRE', sheet, sheet_ttl_s)
redis.call('HSET', job, 'lease_until', now + lease_ms)
if count > 0 then
  -- Progress: the next transient failure starts a fresh run of retries.
  redis.call('HSET', job, 'attempts', 0)
end
local left = redis.call('LLEN', list)
if left > 0 then
  -- The head is now younger than before; "now" is a close upper bound of its age.
  redis.call('ZADD', buffer_index, 'XX', now, base)
end
return left

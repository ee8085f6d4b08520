-- Write-ahead intent before an append: which batch may land in the sheet.
-- KEYS[1] = job, KEYS[2] = inflight
-- ARGV[1] = token, ARGV[2] = now (ms), ARGV[3] = lease (ms), ARGV[4] = batch length
-- (ids from the head of the list), ARGV[5] = first id, ARGV[6] = last id,
-- ARGV[7] = the sheet's last known row before this append
-- Returns 1 when written, 0 when this run no longer holds the buffer.
local job = redis.call('HMGET', KEYS[1], 'token', 'state')
if job[1] ~= ARGV[1] or job[2] ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'lease_until', tonumber(ARGV[2]) + tonumber(ARGV[3]))
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'count', ARGV[4], 'first', ARGV[5],
  'last', ARGV[6], 'after_row', ARGV[7])
return 1

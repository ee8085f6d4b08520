-- Write-ahead intent before an append: which batch may land in the sheet.
-- KEYS: the job, the intent
-- ARGV: token, now (ms), lease (ms), batch length (ids from the head of the list),
--       first id, last id, the sheet's last known row before this append ('' unknown)
-- Returns 1 when written, 0 when this run no longer holds the buffer.
local job, intent = KEYS[1], KEYS[2]
local token, now, lease_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local count, first_id, last_id, after_row = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local live_token, state = unpack(redis.call('HMGET', job, 'token', 'state'))
if live_token ~= token or state ~= 'running' then
  return 0
end
redis.call('HSET', job, 'lease_until', now + lease_ms)
redis.call('HSET', intent, 'token', token, 'count', count, 'first', first_id,
  'last', last_id, 'after_row', after_row)
return 1

-- A running flush extends its lease before a slow step; fenced if it lost the buffer.
-- KEYS: the job
-- ARGV: token, now (ms), lease (ms)
-- Returns 1 when renewed, 0 when this run no longer holds the buffer.
local job = KEYS[1]
local token, now, lease_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local live_token, state = unpack(redis.call('HMGET', job, 'token', 'state'))
if live_token ~= token or state ~= 'running' then
  return 0
end
redis.call('HSET', job, 'lease_until', now + lease_ms)
return 1

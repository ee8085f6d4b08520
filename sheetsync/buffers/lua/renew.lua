-- A running flush extends its lease before a slow step; fenced if it lost the buffer.
-- KEYS[1] = job
-- ARGV[1] = token, ARGV[2] = now (ms), ARGV[3] = lease (ms)
-- Returns 1 when renewed, 0 when this run no longer holds the buffer.
local job = redis.call('HMGET', KEYS[1], 'token', 'state')
if job[1] ~= ARGV[1] or job[2] ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'lease_until', tonumber(ARGV[2]) + tonumber(ARGV[3]))
return 1

-- A running flush extends its lease before a slow step; fenced if it lost the buffer.
-- KEYS: the job, the due index
-- ARGV: token, epoch, lease (ms), buffer base
-- Returns {lease until (ms), now (ms)}, or {} when this run no longer holds the buffer.
local job, due_index = KEYS[1], KEYS[2]
local token, epoch, lease_ms, base = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not held_by(job, token, epoch) then
  return {}
end
local now = now_ms()
redis.call('HSET', job, 'lease_until', now + lease_ms)
watch(due_index, base, now + lease_ms)
return {now + lease_ms, now}

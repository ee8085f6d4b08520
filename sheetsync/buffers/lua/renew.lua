-- A running flush extends its lease before a slow step; fenced if it lost the buffer.
-- Returns {lease until (ms), now (ms)}, or {} when this run no longer holds the buffer.
local job = KEYS[1]                -- the job
local due_index = KEYS[2]          -- the due index
local token = ARGV[1]              -- the run's token
local epoch = ARGV[2]              -- the run's epoch
local lease_ms = tonumber(ARGV[3]) -- lease (ms)
local base = ARGV[4]               -- buffer base
if not held_by(job, token, epoch) then
  return {}
end
local now = now_ms()
redis.call('HSET', job, 'lease_until', now + lease_ms)
watch(due_index, base, now + lease_ms)
return {now + lease_ms, now}

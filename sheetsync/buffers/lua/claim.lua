-- A flush task starts: take the buffer if the task's token is still the live one (I2),
-- under a new run epoch.
-- Returns {epoch, lease until (ms), now (ms)} when this run now holds the buffer, or {}
-- when the token was superseded or another run with this token still holds an
-- unexpired lease (a duplicate delivery).
local job = KEYS[1]                -- the job
local due_index = KEYS[2]          -- the due index
local token = ARGV[1]              -- the task's token
local lease_ms = tonumber(ARGV[2]) -- lease (ms)
local base = ARGV[3]               -- buffer base
local now = now_ms()
local live_token, state, lease_until = unpack(redis.call('HMGET', job, 'token', 'state',
  'lease_until'))
if live_token ~= token then
  return {}
end
if state == 'running' and tonumber(lease_until or '0') > now then
  return {}
end
-- A new epoch per claim: an earlier run of this token (whose lease expired) is fenced
-- at its next step, so two deliveries of one token never both act.
local epoch = redis.call('HINCRBY', job, 'epoch', 1)
redis.call('HSET', job, 'state', 'running', 'lease_until', now + lease_ms)
watch(due_index, base, now + lease_ms)
return {epoch, now + lease_ms, now}

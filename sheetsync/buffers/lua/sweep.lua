-- The sweeper's repair of one buffer (I1): a job scheduled long past due (its task was
-- never sent, or was lost), a running job whose lease expired (its worker died), or a
-- non-empty list with no job at all gets a new token. An empty buffer leaves the index.
-- KEYS[1] = buf, KEYS[2] = job, KEYS[3] = sheet, KEYS[4] = buffer index
-- ARGV[1] = buffer base, ARGV[2] = now (ms), ARGV[3] = grace past due (ms),
-- ARGV[4] = queue for a job that has none, ARGV[5] = sheet cache ttl (s)
-- Returns {} when nothing needed doing, else {token, queue, replaced token or ""}.

-- Redis's clock in microseconds: no two scripts ever see the same value.
local function clock_us()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

local base, now = ARGV[1], tonumber(ARGV[2])
local job = redis.call('HMGET', KEYS[2], 'state', 'token', 'due_at', 'lease_until', 'queue')
local state, old_token, queue = job[1], job[2], job[5]
local length = redis.call('LLEN', KEYS[1])

if not state then
  if length == 0 then
    redis.call('ZREM', KEYS[4], base)
    return {}
  end
elseif state == 'scheduled' then
  if tonumber(job[3] or '0') + tonumber(ARGV[3]) > now then
    return {}
  end
elseif state == 'running' then
  if tonumber(job[4] or '0') > now then
    return {}
  end
end

local seq = math.max(tonumber(redis.call('HGET', KEYS[3], 'seq') or '0') + 1, clock_us())
redis.call('HSET', KEYS[3], 'seq', string.format('%d', seq))
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[5]))
local token = base .. '#' .. string.format('%d', seq)
queue = queue or ARGV[4]
redis.call('HSET', KEYS[2], 'token', token, 'state', 'scheduled', 'promoted', '0',
  'queue', queue, 'due_at', now)
redis.call('HDEL', KEYS[2], 'lease_until')
redis.call('ZADD', KEYS[4], 'NX', now, base)
return {token, queue, old_token or ''}

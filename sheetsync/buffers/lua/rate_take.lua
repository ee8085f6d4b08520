-- Take one request slot in two strict sliding windows at once: the Google account's and
-- the project's. Either both are taken or neither, so a refusal by one never wastes a
-- slot of the other (the reason this is not the `limits` library, whose moving window
-- takes one limit per call).
-- KEYS[1] = account window (ZSET), KEYS[2] = project window (ZSET)
-- ARGV[1] = window (ms), ARGV[2] = account limit, ARGV[3] = project limit,
-- ARGV[4] = a unique member for this request
-- Returns {1, 0} when taken, else {0, ms until a slot frees in every refusing window}.
-- Time is the Redis server's, so every worker host shares one clock.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local window = tonumber(ARGV[1])
local limits = {tonumber(ARGV[2]), tonumber(ARGV[3])}
local wait = 0
for i = 1, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  local used = redis.call('ZCARD', KEYS[i])
  if used >= limits[i] then
    -- The slot frees when the entry that put the window at its limit ages out.
    local entry = redis.call('ZRANGE', KEYS[i], used - limits[i], used - limits[i], 'WITHSCORES')
    wait = math.max(wait, tonumber(entry[2]) + window - now + 1)
  end
end
if wait > 0 then
  return {0, wait}
end
for i = 1, 2 do
  redis.call('ZADD', KEYS[i], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[i], window)
end
return {1, 0}

-- Take one request slot in two strict sliding windows at once: the Google account's and
-- the project's. Either both are taken or neither, so a refusal by one never wastes a
-- slot of the other (the reason this is not the `limits` library, whose moving window
-- takes one limit per call). Time is the Redis server's, so every worker host shares
-- one clock.
-- KEYS: the account's window (ZSET), the project's window (ZSET)
-- ARGV: window (ms), account limit, project limit, a unique member for this request
-- Returns {1, 0} when taken, else {0, ms until a slot frees in every refusing window}.
local account_window, project_window = KEYS[1], KEYS[2]
local window_ms, member = tonumber(ARGV[1]), ARGV[4]
local windows = {account_window, project_window}
local limits = {tonumber(ARGV[2]), tonumber(ARGV[3])}
local now = math.floor(clock_us() / 1000)
local wait_ms = 0
for i = 1, 2 do
  redis.call('ZREMRANGEBYSCORE', windows[i], '-inf', now - window_ms)
  local used = redis.call('ZCARD', windows[i])
  if used >= limits[i] then
    -- The slot frees when the entry that put the window at its limit ages out.
    local entry = redis.call('ZRANGE', windows[i], used - limits[i], used - limits[i],
      'WITHSCORES')
    wait_ms = math.max(wait_ms, tonumber(entry[2]) + window_ms - now + 1)
  end
end
if wait_ms > 0 then
  return {0, wait_ms}
end
for i = 1, 2 do
  redis.call('ZADD', windows[i], now, member)
  redis.call('PEXPIRE', windows[i], window_ms)
end
return {1, 0}

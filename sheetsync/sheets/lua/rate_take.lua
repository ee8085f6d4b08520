-- The mechanism: one request slot in two strict sliding windows at once, the Google
-- account's and the project's (both of the request's kind), at the time the policy
-- (rate_turn.lua) chose, or nothing. Whatever the queue decided, no window ever holds
-- more than its limit: this check alone guarantees the limits. The pace (the generic
-- cell rate algorithm) counts every slot taken: its next slot moves a window / limit on.
-- Returns {1, ms to wait before sending} or {0, ms until both windows fit}.
local account_window = KEYS[1]           -- the account's window (ZSET of requests by time)
local project_window = KEYS[2]           -- the project's window
local pace = KEYS[3]                     -- the pace's next slot (ms, STRING)
local window_ms = tonumber(ARGV[1])      -- window (ms)
local account_limit = tonumber(ARGV[2])  -- requests per window, per account
local project_limit = tonumber(ARGV[3])  -- requests per window, per project
local member = ARGV[4]                   -- a unique member for this request
local at = tonumber(ARGV[5])             -- when it goes (Redis ms): now or a little later
local now = now_ms()
at = math.max(at, now)

local function held_at(window, t)
  return redis.call('ZCOUNT', window, '(' .. (t - window_ms), '+inf')
end

local waits = 0
for _, window in ipairs({account_window, project_window}) do
  redis.call('ZREMRANGEBYSCORE', window, '-inf', now - window_ms)
  local limit = window == account_window and account_limit or project_limit
  local held = held_at(window, at)
  if held >= limit then
    -- It fits once the oldest entries that hold it over the limit age out.
    local oldest = redis.call('ZRANGE', window, '(' .. (at - window_ms), '+inf', 'BYSCORE',
      'LIMIT', held - limit, 1, 'WITHSCORES')
    waits = math.max(waits, tonumber(oldest[2]) + window_ms + 1 - now)
  end
end
if waits > 0 then
  return {0, waits}
end

local next_slot = tonumber(redis.call('GET', pace) or '0')
redis.call('SET', pace, string.format('%.3f', math.max(next_slot, at) + window_ms / project_limit),
  'PX', 2 * window_ms)
for _, window in ipairs({account_window, project_window}) do
  redis.call('ZADD', window, at, member)
  redis.call('PEXPIRE', window, at - now + window_ms)
end
return {1, at - now}

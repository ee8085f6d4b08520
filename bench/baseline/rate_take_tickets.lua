-- BASELINE for bench/bench_quota.py: the limiter as it was before the fair queue
-- (sheetsync 0.3 at d60d048), kept to measure the new design against in the same run.
-- A request slot in two strict sliding windows at once: the Google account's and the
-- project's, both of the request's kind (reads and writes have windows of their own, as
-- Google counts them; the caller passes the kind's keys and limits). Either both are taken or neither (the reason this is not the `limits`
-- library, whose moving window takes one limit per call). Time is the Redis server's.
--
-- The windows hold the requests taken, at the time each goes (now, or within the lead),
-- and a request is taken only where every window that would hold it stays within its
-- limit: the limits are strict whatever else happens.
--
-- A buffer that must wait gets a ticket: the time a slot would free for it if everyone
-- ahead took theirs on time (the earliest time after every entry and ticket, and a
-- window after the one `limit` places back). Each waiting buffer wakes at its own time
-- instead of all waking when one slot frees. Tickets are a queue, not slots: a ticket
-- holder takes its slot by the same strict check, so a holder that wakes late still goes
-- if the windows allow it, and one that cannot go yet gets a later ticket. Requests with
-- no ticket count the live tickets as taken, so they do not jump the queue; a ticket
-- more than the grace in the past is abandoned.
-- Returns {1, ms to wait before sending} when the request has its slot, or
-- {0, ms until the buffer's ticket} (or until a slot would free, for no buffer).
local account_window = KEYS[1]          -- the account's window (ZSET of requests)
local project_window = KEYS[2]          -- the project's window
local account_tickets = KEYS[3]         -- the account's tickets (ZSET of waiting buffers)
local project_tickets = KEYS[4]         -- the project's tickets
local window_ms = tonumber(ARGV[1])     -- window (ms)
local account_limit = tonumber(ARGV[2]) -- requests per window, per account
local project_limit = tonumber(ARGV[3]) -- requests per window, per project
local member = ARGV[4]                  -- a unique member for this request
local waiter = ARGV[5]                  -- the waiting buffer ('' for none)
local mode = ARGV[6]                    -- 'reserve': get a ticket, take nothing; 'take':
                                        -- the request goes now or within the lead
local lead_ms = tonumber(ARGV[7])       -- lead (ms)
local grace_ms = tonumber(ARGV[8])      -- ticket grace (ms)
local windows = {account_window, project_window}
local tickets = {account_tickets, project_tickets}
local limits = {account_limit, project_limit}
local now = now_ms()

local function set_in(keys, name, at)
  for i = 1, 2 do
    redis.call('ZADD', keys[i], at, name)
    redis.call('PEXPIRE', keys[i], math.max(at - now, 0) + window_ms + grace_ms)
  end
end

local function drop_ticket()
  for i = 1, 2 do
    redis.call('ZREM', tickets[i], waiter)
  end
end

-- The scores of a ZSET between `from` and `to` (ZRANGEBYSCORE bounds).
local function scores_of(key, from, to, into)
  local found = redis.call('ZRANGEBYSCORE', key, from, to, 'WITHSCORES')
  for j = 2, #found, 2 do
    into[#into + 1] = tonumber(found[j])
  end
  return into
end

-- The scores near `t` (within a window either side) of window i, with the live tickets
-- when `with_tickets`.
local function nearby(i, t, with_tickets)
  local to = '(' .. (t + window_ms)
  local scores = scores_of(windows[i], '(' .. (t - window_ms), to, {})
  if with_tickets then
    scores_of(tickets[i], '(' .. math.max(t - window_ms, now - grace_ms), to, scores)
  end
  return scores
end

-- Whether a request at `t` keeps every window that would hold it within its limit.
local function fits(t, with_tickets)
  for i = 1, 2 do
    local scores = nearby(i, t, with_tickets)
    scores[#scores + 1] = t
    table.sort(scores)
    local first = 1
    for last = 1, #scores do
      while scores[first] <= scores[last] - window_ms do
        first = first + 1
      end
      if scores[last] >= t and last - first + 1 > limits[i] then
        return false
      end
    end
  end
  return true
end

-- The earliest time after every entry (and ticket) of both windows, and a window after
-- the one `limit` places back: always within the limits.
local function after_everyone(with_tickets)
  local slot = now
  for i = 1, 2 do
    local values = scores_of(windows[i], '-inf', '+inf', {})
    if with_tickets then
      scores_of(tickets[i], now - grace_ms, '+inf', values)
    end
    table.sort(values)
    local n = #values
    if n > 0 then
      slot = math.max(slot, values[n])
    end
    if n >= limits[i] then
      slot = math.max(slot, values[n - limits[i] + 1] + window_ms + 1)
    end
  end
  return slot
end

for i = 1, 2 do
  redis.call('ZREMRANGEBYSCORE', windows[i], '-inf', now - window_ms)
  redis.call('ZREMRANGEBYSCORE', tickets[i], '-inf', now - window_ms - grace_ms)
end

local ticket = waiter ~= '' and tonumber(redis.call('ZSCORE', tickets[1], waiter)) or nil
if ticket and ticket > now + lead_ms then
  return {0, ticket - now}  -- not this buffer's turn yet
end

if mode == 'reserve' then
  if ticket then
    return {0, math.max(ticket - now, 0)}
  end
  if fits(now, true) then
    return {0, 0}
  end
  local slot = after_everyone(true)
  if waiter ~= '' then
    set_in(tickets, waiter, slot)
  end
  return {0, slot - now}
end

-- A ticket holder whose turn it is goes by the strict check alone; anyone else also
-- leaves the live tickets their slots.
local queued = ticket == nil
if fits(now, queued) then
  if ticket then
    drop_ticket()
  end
  set_in(windows, member, now)
  return {1, 0}
end
local slot = after_everyone(queued)
if slot <= now + lead_ms then
  if ticket then
    drop_ticket()
  end
  set_in(windows, member, slot)
  return {1, slot - now}
end
if waiter ~= '' then
  set_in(tickets, waiter, slot)
end
return {0, slot - now}

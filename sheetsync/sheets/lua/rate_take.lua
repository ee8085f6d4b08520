-- A request slot in two strict sliding windows at once, the Google account's and the
-- project's, both of the request's kind (reads and writes have windows and queues of
-- their own, as Google counts them). Either both are taken or neither. Time is the Redis
-- server's.
--
-- The windows hold the requests taken, at the time each goes (now, or within the lead);
-- a request is taken only where both windows stay within their limits, whatever else
-- happens. Who goes when slots are short is a weighted fair queue over Google accounts:
-- a waiting buffer's turn starts where its account's last turn ended (or at the queue's
-- clock, if later) and lasts 1 / the owner's weight; the turn that ends first (the
-- lowest tag) goes first. So an account with many waiting buffers gets one turn per round
-- like an account with one, and a paying owner (weight w) goes before FREE newcomers
-- and gets w turns per FREE owner's one, never all of them. A run that has started its
-- sequence (read, header, append) is "continuing": its next request keeps the tag of the
-- last (its turn), and the account is charged for it. A buffer whose account window is
-- full waits parked (out of the queue, with its tag) until its account frees, so it
-- blocks nobody. The project's slots are paced a window / limit apart. Every step
-- is a sorted-set lookup: the cost stays flat with thousands of waiters.
--
-- Every waiter has an expected time (when it was told to come back, or, told to go on,
-- when its lead is up); one more than the grace past it has gone away and loses its
-- place. A free slot goes to a waiter behind one that is not expected yet or is late (no
-- slot idles while its owner sleeps; the late one keeps its place and takes the next
-- slot when it comes).
-- Returns {1, ms to wait before sending, 0} when the request has its slot, or {0, ms
-- until the waiter's turn is expected, ms until it may ask to take it} ({0, 0, 0} in
-- reserve mode when it may go now).
local account_window = KEYS[1]         -- the account's window (ZSET of requests)
local project_window = KEYS[2]         -- the project's window
local queue = KEYS[3]                  -- waiting buffers by tag (ZSET)
local served_tags = KEYS[4]            -- the tag of each buffer's last slot (HASH)
local parked = KEYS[5]                 -- buffers whose account is full, by when it frees
local parked_tags = KEYS[6]            -- the parked buffers' tags (HASH)
local expected = KEYS[7]               -- when each waiter was told to come back (HASH)
local shares = KEYS[8]                 -- where each account's turns end, and the clock
local account_waiting = KEYS[9]        -- the account's waiting buffers by tag, twice for a
                                       -- turn of two slots (ZSET)
local window_ms = tonumber(ARGV[1])    -- window (ms)
local account_limit = tonumber(ARGV[2]) -- requests per window, per account
local project_limit = tonumber(ARGV[3]) -- requests per window, per project
local account = ARGV[4]                -- the Google account
local weight = tonumber(ARGV[5])       -- the owner's weight (1 for FREE)
local member = ARGV[6]                 -- a unique member for this request
local waiter = ARGV[7]                 -- the waiting buffer ('' for none)
local mode = ARGV[8]                   -- 'reserve': get a place, take nothing; 'take':
                                       -- the request goes now or within the lead
local is_continuing = ARGV[9] == '1'   -- the waiter's run has started its sequence
local lead_ms = tonumber(ARGV[10])     -- lead (ms)
local grace_ms = tonumber(ARGV[11])    -- a waiter this late has gone away (ms)
local slots = tonumber(ARGV[12])       -- slots its turn still needs: 2 for a first write
                                       -- (the header, then the append), else 1
local CLOCK = '~clock'                 -- the shares field of the queue's clock
local SCAN = 32                        -- queue heads looked at past the free slots
local BURST = 0.1                      -- the pace lets this share of a window's slots go at
                                       -- once (requests that come late catch up)
local HORIZON = 20                     -- a slot is taken at most this far ahead (ms)
local LATE = HORIZON                   -- a waiter this far past its time holds no slot:
                                       -- the next one present takes it (ms)
local PACE = '~pace'                   -- the shares field of the pace's next slot (GCRA)
local SECOND = '|second'               -- a waiter's second slot in its account's line
local NEWCOMER_FIRST = 1e-6            -- a newcomer's tag is this much lower than a
                                       -- waiting account's turn ending with it
local now = now_ms()
local ttl = 4 * window_ms + grace_ms
local spacing = window_ms / project_limit

local function forget(name)
  redis.call('ZREM', queue, name)
  redis.call('ZREM', parked, name)
  redis.call('HDEL', parked_tags, name)
  redis.call('HDEL', expected, name)
end

local function number(value)
  return tonumber(value or '0')
end

-- The next tag of this account: its turn starts at the later of the queue's clock and
-- the end of the account's last turn, lasts 1 / weight, and the tag is when it ends, so
-- a paying newcomer's tag is lower than a FREE newcomer's. The clock is where the turn
-- last served started (start-time fair queuing's virtual time): an account that was not
-- waiting starts there, in the round in progress, not behind the turns others ran up,
-- and its turn goes before the waiting accounts' turns that end with it (as fq_codel
-- serves new flows first): ties would otherwise go by buffer name, and a small owner
-- could wait a whole round.
local function charge()
  local clock = number(redis.call('HGET', shares, CLOCK))
  local last = number(redis.call('HGET', shares, account))
  local start = math.max(clock, last)
  redis.call('HSET', shares, account, start + 1 / weight)
  -- (the clock may be a newcomer's turn's start, NEWCOMER_FIRST early)
  if last <= clock + NEWCOMER_FIRST then
    return start + 1 / weight - NEWCOMER_FIRST
  end
  return start + 1 / weight
end

local function enqueue(name, tag)
  redis.call('ZADD', queue, tag, name)
  redis.call('ZADD', account_waiting, tag, name)
end

-- Requests a window holds (future ones too), and when the k-th slot (0-based) not yet
-- taken opens: now for the free ones, then as the oldest requests age out.
local function held(window)
  return redis.call('ZCOUNT', window, '(' .. (now - window_ms), '+inf')
end
local function opens(window, count, limit, k)
  if k < limit - count then
    return now
  end
  local past = k - (limit - count)
  if count == 0 then
    return now + window_ms * math.floor(past / limit + 1)
  end
  local index = past % count
  local oldest = redis.call('ZRANGE', window, index, index, 'WITHSCORES')
  return tonumber(oldest[2]) + window_ms * (1 + math.floor(past / count)) + 1
end

for _, window in ipairs({account_window, project_window}) do
  redis.call('ZREMRANGEBYSCORE', window, '-inf', now - window_ms)
end

-- Parked waiters whose account has freed rejoin the queue with their tags.
local back = redis.call('ZRANGEBYSCORE', parked, '-inf', now, 'LIMIT', 0, SCAN)
for _, name in ipairs(back) do
  local tag = redis.call('HGET', parked_tags, name)
  redis.call('ZREM', parked, name)
  redis.call('HDEL', parked_tags, name)
  if tag then
    redis.call('ZADD', queue, tag, name)
  end
end

-- Where the waiter stands: queued or parked (with its tag), or new. A new request of a
-- continuing run takes the tag of its run's last slot: the same turn, charged again.
local tag = nil
local in_parked = false
if waiter ~= '' then
  tag = tonumber(redis.call('ZSCORE', queue, waiter))
  if not tag then
    tag = tonumber(redis.call('HGET', parked_tags, waiter))
    in_parked = tag ~= nil
  end
  if not tag then
    local served = is_continuing and tonumber(redis.call('HGET', served_tags, waiter))
    if served then
      charge()
      tag = served
    else
      tag = charge()
    end
    enqueue(waiter, tag)
  end
  redis.call('HSET', expected, waiter, now)
  -- A turn of two slots stands twice in its account's line (right behind itself), so
  -- those behind it are told when their turns really come.
  if slots > 1 then
    redis.call('ZADD', account_waiting, tag, waiter .. SECOND)
  else
    redis.call('ZREM', account_waiting, waiter .. SECOND)
  end
end

-- Who goes before it: the queue's lower tags (a request of no buffer stands behind the
-- whole queue), and, before its own account's window lets it go, that account's.
local ahead
if in_parked then
  ahead = redis.call('ZCOUNT', queue, '-inf', '(' .. tag)
elseif waiter ~= '' then
  ahead = redis.call('ZRANK', queue, waiter)
else
  ahead = redis.call('ZCARD', queue)
end
local account_ahead = 0
local mine = waiter ~= '' and redis.call('ZRANK', account_waiting, waiter)
account_ahead = mine or redis.call('ZCARD', account_waiting)
if account_ahead > 0 then
  -- Those that left the queue (their entries are gone) are dropped on the way.
  local heads = redis.call('ZRANGE', account_waiting, 0, math.min(account_ahead, SCAN) - 1)
  for _, name in ipairs(heads) do
    local own = name
    if string.sub(name, -#SECOND) == SECOND then
      own = string.sub(name, 1, -#SECOND - 1)
    end
    if not redis.call('HGET', expected, own) then
      redis.call('ZREM', account_waiting, name)
      account_ahead = account_ahead - 1
    end
  end
end

local project_count = held(project_window)
local account_count = held(account_window)
local project_free = project_limit - project_count
local account_free = account_limit - account_count

-- A slot goes past waiters who are not expected yet (and drops those gone away). Only
-- the heads within the free slots (and SCAN more) are looked at; expected times grow
-- along the queue, so when the last head looked at is not expected yet, nobody behind
-- it is either.
local due_ahead = ahead
if ahead > 0 then
  local looked = math.min(ahead, math.max(project_free, 1) + SCAN)
  local heads = redis.call('ZRANGE', queue, 0, looked - 1)
  local due, last_due = 0, false
  for _, name in ipairs(heads) do
    local at = number(redis.call('HGET', expected, name))
    last_due = false
    if at + grace_ms < now then
      forget(name)
    elseif at >= now - LATE and at <= now + lead_ms then
      due, last_due = due + 1, true
    end
  end
  due_ahead = due
  if last_due then
    due_ahead = due_ahead + (ahead - looked)
  end
end

local function keep_alive()
  for _, key in ipairs({queue, served_tags, parked, parked_tags, expected, shares,
                        account_waiting}) do
    redis.call('PEXPIRE', key, ttl)
  end
end

-- The project's slots are paced a window / limit apart (the generic cell rate algorithm,
-- with a burst of a tenth of the window): the window frees its slots in the bursts they
-- were taken in, so a burst would keep newcomers waiting for most of a window, and a
-- buffer that sends one request at a time would get one slot per burst while a busy
-- account takes the rest. The burst lets requests that came late catch up, so pacing
-- costs no capacity. The pace counts every request; it holds them back only while
-- others are queued.
local pace = math.max(number(redis.call('HGET', shares, PACE)), now)
local tolerance = BURST * window_ms

local function take_at(at)
  redis.call('HSET', shares, PACE, math.max(pace, at) + spacing)
  for _, window in ipairs({account_window, project_window}) do
    redis.call('ZADD', window, at, member)
    redis.call('PEXPIRE', window, math.max(at - now, 0) + window_ms + grace_ms)
  end
  if waiter ~= '' then
    local clock = number(redis.call('HGET', shares, CLOCK))
    redis.call('HSET', shares, CLOCK, math.max(clock, tag - 1 / weight))
    redis.call('HSET', served_tags, waiter, tag)
    forget(waiter)
    redis.call('ZREM', account_waiting, waiter, waiter .. SECOND)
  else
    charge()
  end
  keep_alive()
  return {1, math.max(at - now, 0), 0}
end

-- Paced while others are queued (a burst with nobody waiting goes as the window allows).
local paced = redis.call('ZCARD', queue) > (waiter ~= '' and 1 or 0)
-- When the project would let the k-th request from now go (0: the next).
local function slot_for(k)
  local t = opens(project_window, project_count, project_limit, k)
  if paced then
    t = math.max(t, math.floor(pace + k * spacing - tolerance))
  end
  return t
end
-- How far ahead a slot may be taken (the caller sleeps until it): hardly at all, so
-- nobody holds an opening that a request ahead of it in the line could use.
local horizon = math.min(lead_ms, HORIZON)
local account_at = opens(account_window, account_count, account_limit, account_ahead)
-- When it may go if those ahead and not expected yet stay away, and when its turn is
-- expected if everyone ahead takes theirs.
local project_at = slot_for(due_ahead)
local at = math.max(project_at, account_at)
local expected_at = math.max(slot_for(ahead), account_at)

-- The strict check at the time the request would go: both windows keep it within limit.
local function fits(t)
  return redis.call('ZCOUNT', project_window, '(' .. (t - window_ms), '+inf') < project_limit
    and redis.call('ZCOUNT', account_window, '(' .. (t - window_ms), '+inf') < account_limit
end

-- Those ahead keep their slots: it goes only when there is one for each of them too.
local next_in_line = account_ahead < math.max(account_free, 1)
if mode == 'take' and next_in_line and at <= now + horizon and fits(at) then
  return take_at(at)
end
-- A waiter told to go on (now, or within the lead) builds its batch and reads row 1
-- before it asks for the slot: its turn is held for it until the lead is up, not given
-- to the first one present (as a waiter that was told to come back later loses it once
-- LATE), so a paying owner's read does not hand its turn to a FREE one's.
if mode == 'reserve' and at <= now and fits(now) then
  if waiter ~= '' then
    redis.call('HSET', expected, waiter, now + lead_ms)
  end
  keep_alive()
  return {0, 0, 0}
end

if waiter ~= '' then
  if account_at > project_at and not in_parked then
    -- Its account is the bottleneck: out of the queue until then, keeping its tag.
    redis.call('ZREM', queue, waiter)
    redis.call('ZADD', parked, account_at, waiter)
    redis.call('HSET', parked_tags, waiter, tag)
  end
  if mode == 'reserve' and expected_at <= now + lead_ms then
    redis.call('HSET', expected, waiter, now + lead_ms)
  else
    redis.call('HSET', expected, waiter, expected_at)
  end
end
keep_alive()
return {0, math.max(expected_at - now, 1), math.max(at - horizon - now, 1)}

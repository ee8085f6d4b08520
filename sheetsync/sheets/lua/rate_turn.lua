-- The policy: a waiting buffer's turn at one kind's queue, and whether its request may go
-- now (rate_take.lua then takes the slot, strictly) or when its turn is expected. It
-- takes no slot: the queue's order is policy, the windows are the guarantee.
--
-- Weighted fair queueing over Google accounts (start-time fair queueing's clock): a turn
-- of `cost` slots starts where its account's last turn ended (its debt) or at the clock,
-- if later; each slot lasts UNIT / weight, and the account is charged them all. Turns go
-- in the order their first slots end (its tag). The clock is the start of the turn last
-- served, so an account that was not waiting joins the round in progress. Ties: a
-- newcomer (an account with no debt past the clock) goes before a waiting account's turn
-- ending with its own, then by name. A turn stays at its place until its slots are used
-- (rate_served.lua) or it leaves (rate_leave.lua).
--
-- A buffer whose account window is full waits parked (out of the queue, keeping its turn)
-- until the account frees, blocking nobody. Every waiter has an expected time; a free
-- slot goes past waiters not expected yet or more than `late_ms` late, and one more than
-- the grace late has gone away: its turn is dropped and its unused slots given back.
-- Returns {1, when it goes (Redis ms), 0} when the request may go now (within the lead),
-- else {0, ms until its turn is expected, ms until it may ask to take it} ({0, 0, 0} in
-- reserve mode when it may go now).
local account_window = KEYS[1]           -- the account's window (read only here)
local project_window = KEYS[2]           -- the project's window (read only here)
local pace = KEYS[3]                     -- the pace's next slot (read only here)
local queue = KEYS[4]                    -- waiting turns by rank (ZSET)
local turns = KEYS[5]                    -- each waiter's turn (HASH, see `record`)
local parked = KEYS[6]                   -- turns whose account is full, by when it frees
local expected = KEYS[7]                 -- when each waiter is expected (HASH, ms)
local debts = KEYS[8]                    -- where each account's last turn ends, for the
                                         -- accounts whose debt is past the clock (ZSET)
local clock = KEYS[9]                    -- the start of the turn last served (STRING)
local lines = KEYS[10]                   -- every account's line: its turns in rank order,
                                         -- '<account> <rank, 16 hex digits> <waiter>' (ZSET
                                         -- of equal scores, read by lex ranges)
local window_ms = tonumber(ARGV[1])      -- window (ms)
local account_limit = tonumber(ARGV[2])  -- requests per window, per account
local project_limit = tonumber(ARGV[3])  -- requests per window, per project
local account = ARGV[4]                  -- the Google account
local weight = tonumber(ARGV[5])         -- the owner's weight (1 for FREE)
local waiter = ARGV[6]                   -- the waiting buffer ('' for none)
local mode = ARGV[7]                     -- 'reserve': a place, and when it may go; 'take':
                                         -- the request goes now or within the lead
local cost = tonumber(ARGV[8])           -- slots a new turn needs (a first write: 2)
local lead_ms = tonumber(ARGV[9])        -- lead (ms)
local grace_ms = tonumber(ARGV[10])      -- a waiter this late has gone away (ms)
local late_ms = tonumber(ARGV[11])       -- a waiter this late holds no slot (ms)
local UNIT = 720720                      -- a FREE slot's length in the clock's units: whole
                                         -- for every whole weight up to 16: ties are exact
local SCAN = 32                          -- queue heads looked at past the free slots
local BURST = 0.1                        -- the pace lets this share of a window's slots go
                                         -- at once (requests that come late catch up)
local HORIZON = 20                       -- a slot is taken at most this far ahead (ms)
local now = now_ms()
local ttl = 4 * window_ms + grace_ms
local spacing = window_ms / project_limit
local the_clock = tonumber(redis.call('GET', clock) or '0')

-- A turn: "account start slot rank cost left" (slot: one slot's length; rank: its place
-- in the queue, see `rank`; left: its slots not used yet).
local function record(name)
  local text = redis.call('HGET', turns, name)
  if not text then
    return nil
  end
  local a, s, l1, r, c, l = string.match(text, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  return {account = a, start = tonumber(s), slot = tonumber(l1), rank = tonumber(r),
          cost = tonumber(c), left = tonumber(l)}
end

-- The explicit order of turns: by tag (where the first slot ends), a newcomer's first
-- when two tags are equal (then by name).
local function rank(start, slot, newcomer)
  return 2 * (start + slot) + (newcomer and 0 or 1)
end

-- The turn's place in its account's line (rate_served.lua and rate_leave.lua remove it).
local function in_line(turn, name)
  return string.format('%s %016x %s', turn.account, turn.rank, name)
end

-- Give back `slots` of a turn not used (the end of its charge) if it is its account's
-- last turn: from an earlier one they would let the account's next turn tie with or pass
-- its own turns waiting, whose times were told. rate_leave.lua does the same.
local function give_back(turn, slots)
  local debt = tonumber(redis.call('ZSCORE', debts, turn.account))
  if slots == 0 or debt ~= turn.start + turn.cost * turn.slot then
    return false
  end
  debt = debt - slots * turn.slot
  if debt <= the_clock then
    redis.call('ZREM', debts, turn.account)
  else
    redis.call('ZADD', debts, debt, turn.account)
  end
  return true
end

local function save(turn, name)
  redis.call('HSET', turns, name, string.format('%s %d %d %d %d %d', turn.account, turn.start,
    turn.slot, turn.rank, turn.cost, turn.left))
end

-- A turn that will not be used: out of every key, its unused slots given back.
local function drop(name)
  local turn = record(name)
  if turn then
    redis.call('ZREM', lines, in_line(turn, name))
    give_back(turn, turn.left)
  end
  redis.call('ZREM', queue, name)
  redis.call('ZREM', parked, name)
  redis.call('HDEL', turns, name)
  redis.call('HDEL', expected, name)
end

-- A new turn of `cost` slots for this account.
local function charge()
  local debt = tonumber(redis.call('ZSCORE', debts, account))
  local newcomer = debt == nil or debt <= the_clock
  local start = newcomer and the_clock or debt
  local slot = math.floor(UNIT / weight + 0.5)
  local turn = {account = account, start = start, slot = slot, cost = cost, left = cost,
                rank = rank(start, slot, newcomer)}
  redis.call('ZADD', debts, start + cost * slot, account)
  save(turn, waiter)
  redis.call('ZADD', queue, turn.rank, waiter)
  redis.call('ZADD', lines, 0, in_line(turn, waiter))
  return turn
end

local function held(window)
  return redis.call('ZCOUNT', window, '(' .. (now - window_ms), '+inf')
end

-- When the k-th slot (0-based) not yet taken opens: now for the free ones, then as the
-- oldest requests age out.
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

-- Parked turns whose account has freed rejoin the queue.
for _, name in ipairs(redis.call('ZRANGEBYSCORE', parked, '-inf', now, 'LIMIT', 0, SCAN)) do
  redis.call('ZREM', parked, name)
  local turn = record(name)
  if turn then
    redis.call('ZADD', queue, turn.rank, name)
  end
end

-- The waiter's turn: its own, or a new one. A reserve says what its batch needs: a turn
-- left with more slots keeps its place and gives the rest back.
local turn = nil
local in_parked = false
if waiter ~= '' then
  turn = record(waiter)
  if turn and mode == 'reserve' and turn.left > cost then
    if give_back(turn, turn.left - cost) then
      turn.cost = turn.cost - (turn.left - cost)
    end
    turn.left = cost
    save(turn, waiter)
  end
  if turn then
    in_parked = redis.call('ZSCORE', parked, waiter) ~= false
  else
    turn = charge()
  end
  redis.call('HSET', expected, waiter, now)
end

-- Who goes before it: the queue's lower ranks (a request of no buffer stands behind the
-- whole queue), and, before its account's window lets it go, the slots its account's
-- turns ahead of it still need (a request of no buffer: all of them).
local ahead
if in_parked then
  ahead = redis.call('ZCOUNT', queue, '-inf', string.format('(%d', turn.rank))
elseif waiter ~= '' then
  ahead = redis.call('ZRANK', queue, waiter)
else
  ahead = redis.call('ZCARD', queue)
end
local first = '[' .. account .. ' '
local before = waiter ~= '' and '(' .. in_line(turn, waiter) or '(' .. account .. '!'
local in_front = redis.call('ZLEXCOUNT', lines, first, before)
-- Those late hold none of the account's slots, as at the queue: an idle slot is lost.
local account_ahead = math.max(in_front - SCAN, 0)
local account_present_ahead = account_ahead
for _, entry in ipairs(redis.call('ZRANGEBYLEX', lines, first, before, 'LIMIT', 0, SCAN)) do
  local name = string.match(entry, '^%S+ %S+ (.*)$')
  local other = record(name)
  local left = other and other.left or 1
  account_ahead = account_ahead + left
  if tonumber(redis.call('HGET', expected, name) or '0') >= now - late_ms then
    account_present_ahead = account_present_ahead + left
  end
end

local project_count = held(project_window)
local account_count = held(account_window)
local project_free = project_limit - project_count
local account_free = account_limit - account_count

-- A slot goes past waiters not expected yet (and drops those gone away). Only the heads
-- within the free slots (and SCAN more) are looked at; expected times grow along the
-- queue, so when the last head looked at is not expected yet, nobody behind it is either.
local due_ahead = ahead
if ahead > 0 then
  local looked = math.min(ahead, math.max(project_free, 1) + SCAN)
  local due, last_due = 0, false
  for _, name in ipairs(redis.call('ZRANGE', queue, 0, looked - 1)) do
    local at = tonumber(redis.call('HGET', expected, name) or '0')
    last_due = false
    if at + grace_ms < now then
      drop(name)
    elseif at >= now - late_ms and at <= now + lead_ms then
      due, last_due = due + 1, true
    end
  end
  due_ahead = due
  if last_due then
    due_ahead = due_ahead + (ahead - looked)
  end
end

for _, key in ipairs({queue, turns, parked, expected, debts, clock, lines}) do
  redis.call('PEXPIRE', key, ttl)
end

-- The project's slots are paced a window / limit apart while others are queued (the
-- generic cell rate algorithm, with a burst of a tenth of the window): a sliding window
-- frees its slots in the bursts they were taken in, which would keep newcomers waiting
-- for most of a window; the burst lets late requests catch up, so pacing costs nothing.
local paced = redis.call('ZCARD', queue) > (waiter ~= '' and 1 or 0)
local next_slot = math.max(tonumber(redis.call('GET', pace) or '0'), now)
local function slot_for(k)
  local t = opens(project_window, project_count, project_limit, k)
  if paced then
    t = math.max(t, math.floor(next_slot + k * spacing - BURST * window_ms))
  end
  return t
end
-- A slot is taken hardly ahead at all, so nobody holds an opening that a request ahead
-- of it in the line could use.
local horizon = math.min(lead_ms, HORIZON)
local account_at = opens(account_window, account_count, account_limit, account_ahead)
local account_go = opens(account_window, account_count, account_limit, account_present_ahead)
-- When it may go if those ahead and not expected yet stay away, and when its turn is
-- expected if everyone ahead takes theirs.
local project_at = slot_for(due_ahead)
local at = math.max(project_at, account_go)
local expected_at = math.max(slot_for(ahead), account_at)

local function fits(t)
  return redis.call('ZCOUNT', project_window, '(' .. (t - window_ms), '+inf') < project_limit
    and redis.call('ZCOUNT', account_window, '(' .. (t - window_ms), '+inf') < account_limit
end

-- Those ahead in its account's line keep their slots: it goes only when there is one for
-- each of them too.
local next_in_line = account_present_ahead < math.max(account_free, 1)
if mode == 'take' and next_in_line and at <= now + horizon then
  return {1, at, 0}
end
-- A waiter told to go on builds its batch before it asks for the slot: its turn is held
-- for it until the lead is up, not given to the first one present.
if mode == 'reserve' and at <= now and fits(now) then
  if waiter ~= '' then
    redis.call('HSET', expected, waiter, now + lead_ms)
  end
  return {0, 0, 0}
end

if waiter ~= '' then
  if account_at > project_at and not in_parked then
    -- Its account is the bottleneck: out of the queue until then, keeping its turn.
    redis.call('ZREM', queue, waiter)
    redis.call('ZADD', parked, account_at, waiter)
  end
  if mode == 'reserve' and expected_at <= now + lead_ms then
    redis.call('HSET', expected, waiter, now + lead_ms)
  else
    redis.call('HSET', expected, waiter, expected_at)
  end
end
return {0, math.max(expected_at - now, 1), math.max(at - horizon - now, 1)}

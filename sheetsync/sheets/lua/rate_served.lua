-- A request of a waiting buffer took its slot (rate_take.lua): one slot of its turn is
-- used. The clock moves to the turn's start; a turn whose slots are all used leaves the
-- queue. Then what no turn needs is dropped, whatever the traffic: the debts the clock
-- has passed, all of them when nobody waits, and past `max_debts` the smallest.
-- Returns 1, or 0 when the request did not take its slot (nothing is used).
local queue = KEYS[1]                    -- waiting turns by rank (rate_turn.lua's)
local turns = KEYS[2]                    -- each waiter's turn
local parked = KEYS[3]                   -- turns whose account is full
local expected = KEYS[4]                 -- when each waiter is expected
local debts = KEYS[5]                    -- where each account's last turn ends
local clock = KEYS[6]                    -- the start of the turn last served
local lines = KEYS[7]                    -- every account's line (rate_turn.lua's)
local account_window = KEYS[8]           -- the account's window
local waiter = ARGV[1]                   -- the waiting buffer ('' for none)
local member = ARGV[2]                   -- the request's member in the windows
local max_debts = tonumber(ARGV[3])      -- debts kept past the clock, at most

if not redis.call('ZSCORE', account_window, member) then
  return 0
end
local text = waiter ~= '' and redis.call('HGET', turns, waiter)
if text then
  local a, start, slot, rank, c, left = string.match(text,
    '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')  -- as rate_turn.lua's record
  local now_clock = math.max(tonumber(redis.call('GET', clock) or '0'), tonumber(start))
  redis.call('SET', clock, string.format('%d', now_clock), 'KEEPTTL')
  left = tonumber(left) - 1
  if left > 0 then
    redis.call('HSET', turns, waiter, table.concat({a, start, slot, rank, c, left}, ' '))
  else
    redis.call('ZREM', queue, waiter)
    redis.call('ZREM', parked, waiter)
    redis.call('ZREM', lines, string.format('%s %016x %s', a, tonumber(rank), waiter))
    redis.call('HDEL', turns, waiter)
    redis.call('HDEL', expected, waiter)
  end
  redis.call('ZREMRANGEBYSCORE', debts, '-inf', now_clock)
end
if redis.call('ZCARD', queue) + redis.call('ZCARD', parked) == 0 then
  redis.call('DEL', debts)
end
local over = redis.call('ZCARD', debts) - max_debts
if over > 0 then
  redis.call('ZREMRANGEBYRANK', debts, 0, over - 1)
end
return 1

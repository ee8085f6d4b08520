-- A buffer's run ended without waiting for a slot: it leaves both queues (reads' and
-- writes'), and the slots of its turns it did not use are given back to its account (its
-- next turn starts that much earlier) when it was the account's last turn, as rate_turn.lua's
-- drop says why. When nobody waits any more, no debt is kept.
local read_queue = KEYS[1]          -- the reads' queue (rate_turn.lua's KEYS[4..10])
local read_turns = KEYS[2]
local read_parked = KEYS[3]
local read_expected = KEYS[4]
local read_debts = KEYS[5]
local read_clock = KEYS[6]
local read_lines = KEYS[7]
local write_queue = KEYS[8]         -- the writes' queue
local write_turns = KEYS[9]
local write_parked = KEYS[10]
local write_expected = KEYS[11]
local write_debts = KEYS[12]
local write_clock = KEYS[13]
local write_lines = KEYS[14]
local waiter = ARGV[1]              -- the buffer

local function leave(queue, turns, parked, expected, debts, clock, lines)
  local text = redis.call('HGET', turns, waiter)
  if text then
    -- As rate_turn.lua's drop: "account start slot rank cost left"; out of its
    -- account's line, the unused slots given back.
    local a, start, slot, rank, cost, left = string.match(text,
      '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
    redis.call('ZREM', lines, string.format('%s %016x %s', a, tonumber(rank), waiter))
    local debt = tonumber(redis.call('ZSCORE', debts, a))
    if tonumber(left) > 0 and debt == tonumber(start) + tonumber(cost) * tonumber(slot) then
      debt = debt - tonumber(left) * tonumber(slot)
      if debt <= tonumber(redis.call('GET', clock) or '0') then
        redis.call('ZREM', debts, a)
      else
        redis.call('ZADD', debts, debt, a)
      end
    end
  end
  redis.call('ZREM', queue, waiter)
  redis.call('ZREM', parked, waiter)
  redis.call('HDEL', turns, waiter)
  redis.call('HDEL', expected, waiter)
  if redis.call('ZCARD', queue) + redis.call('ZCARD', parked) == 0 then
    redis.call('DEL', debts)
  end
end

leave(read_queue, read_turns, read_parked, read_expected, read_debts, read_clock, read_lines)
leave(write_queue, write_turns, write_parked, write_expected, write_debts, write_clock,
  write_lines)
return 1

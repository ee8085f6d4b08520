-- A buffer's run ended without waiting for a slot: it leaves both queues (reads' and
-- writes'), so nobody keeps a place for it.
local read_queue = KEYS[1]          -- the reads' queue (rate_take.lua's KEYS[3..7])
local read_served_tags = KEYS[2]
local read_parked = KEYS[3]
local read_parked_tags = KEYS[4]
local read_expected = KEYS[5]
local write_queue = KEYS[6]         -- the writes' queue
local write_served_tags = KEYS[7]
local write_parked = KEYS[8]
local write_parked_tags = KEYS[9]
local write_expected = KEYS[10]
local waiter = ARGV[1]              -- the buffer
for _, key in ipairs({read_queue, read_parked, write_queue, write_parked}) do
  redis.call('ZREM', key, waiter)
end
for _, key in ipairs({read_served_tags, read_parked_tags, read_expected, write_served_tags,
                      write_parked_tags, write_expected}) do
  redis.call('HDEL', key, waiter)
end
return 1

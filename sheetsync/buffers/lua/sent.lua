-- Tasks were handed to the broker. A sent task that is late while its queue still has
-- messages waiting is late because workers are busy: the sweeper gives it the long grace.
-- Returns how many jobs were marked (a job that moved on since is left alone).
-- KEYS[1..] each of tasks: job (its buffer's job)
-- ARGV[1..] each of tasks: token (its token)
local marked = 0
for t = 1, #KEYS do
  local live_token, state = unpack(redis.call('HMGET', KEYS[t], 'token', 'state'))
  if live_token == ARGV[t] and state == 'scheduled' then
    redis.call('HSET', KEYS[t], 'sent', '1')
    marked = marked + 1
  end
end
return marked

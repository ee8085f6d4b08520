-- A worker or beat process says it is alive, and what it consumes.
-- KEYS: the heartbeat index (ZSET name -> last seen ms), this process's HASH
-- ARGV: name, role (worker | beat), queues (comma-separated), pid, seconds a heartbeat
--       stays valid
-- Returns the Redis time (ms) recorded. Entries older than the ttl leave the index.
local index, details = KEYS[1], KEYS[2]
local name, role, queues, pid, ttl_s = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local now = now_ms()
redis.call('HSET', details, 'role', role, 'queues', queues, 'pid', pid, 'seen', now)
redis.call('EXPIRE', details, math.ceil(ttl_s))
redis.call('ZADD', index, now, name)
redis.call('ZREMRANGEBYSCORE', index, '-inf', now - ttl_s * 1000)
return now

-- A worker or beat process says it is alive, and what it consumes.
-- Returns the Redis time (ms) recorded. Entries older than the ttl leave the index.
local index = KEYS[1]           -- the heartbeat index (ZSET name -> last seen ms)
local details = KEYS[2]         -- this process's HASH
local name = ARGV[1]            -- the process's name
local role = ARGV[2]            -- worker | beat
local queues = ARGV[3]          -- the queues it consumes, comma-separated
local pid = ARGV[4]             -- its pid
local ttl_s = tonumber(ARGV[5]) -- seconds a heartbeat stays valid
local now = now_ms()
redis.call('HSET', details, 'role', role, 'queues', queues, 'pid', pid, 'seen', now)
redis.call('EXPIRE', details, math.ceil(ttl_s))
redis.call('ZADD', index, now, name)
redis.call('ZREMRANGEBYSCORE', index, '-inf', now - ttl_s * 1000)
return now

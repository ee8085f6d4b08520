-- A beat process is about to send a periodic job: it may, unless a beat (this one or
-- another: a rolling update runs two) was granted the same job less than a share of its
-- interval ago, on Redis's clock. Each beat ticks once per interval, so the job goes
-- once per interval however many beats run, and a beat that joins mid-period waits.
-- Returns 1 when this beat sends the job, 0 when another beat already did.
local last = KEYS[1]                     -- the job's last granted send (ms, STRING)
local interval_ms = tonumber(ARGV[1])    -- the job's interval (ms)
local share = tonumber(ARGV[2])          -- the share of it two sends must be apart
local now = now_ms()
local granted = tonumber(redis.call('GET', last) or '-1')
if granted >= 0 and now - granted < interval_ms * share then
  return 0
end
redis.call('SET', last, string.format('%d', now), 'PX', math.ceil(interval_ms * 3))
return 1

-- lookup (read-only): the whole record and the server time, so that lease
-- expiry is judged by the Redis clock.
if redis.call('EXISTS', key) == 0 then
  return {'not_found'}
end
return {'found', now_ms(), record(true)}

SELECT name, holder, expires_at, acquired_at, expires_at > herald_now() AS live
FROM duties ORDER BY name

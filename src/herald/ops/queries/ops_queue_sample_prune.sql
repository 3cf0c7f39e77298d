-- Queue samples older than what the console draws (its widest window is 24 hours).
DELETE FROM queue_samples WHERE at < herald_now() - make_interval(secs => %(keep_s)s)

SELECT herald_now() AS now

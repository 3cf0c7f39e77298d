-- In the job's tenant (the platform context may record it): the job row names it.
SELECT herald_stale_write(%(id)s, %(fence)s, %(operation)s, %(owner)s)

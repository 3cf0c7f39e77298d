SELECT operation, count(*) AS n FROM stale_writes GROUP BY operation ORDER BY operation

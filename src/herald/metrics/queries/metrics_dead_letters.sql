SELECT kind, reason, count(*) AS n FROM dead_letters GROUP BY kind, reason ORDER BY kind, reason

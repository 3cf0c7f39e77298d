SELECT state::text, count(*) AS n FROM jobs GROUP BY state ORDER BY state

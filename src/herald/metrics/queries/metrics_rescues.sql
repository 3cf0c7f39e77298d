SELECT outcome::text AS outcome, count(*) AS n FROM rescues GROUP BY outcome ORDER BY outcome

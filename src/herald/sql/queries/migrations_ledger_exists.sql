SELECT to_regclass(quote_ident(%(schema)s) || '.schema_migrations') IS NOT NULL AS present

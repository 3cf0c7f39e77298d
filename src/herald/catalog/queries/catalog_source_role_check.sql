-- What the role a database source runs as may do: it must be no superuser, not Herald's
-- own role, hold none of the built-in roles that read files or all data, and read no
-- table outside the allow-listed schemas (system catalogs aside).
SELECT current_user::text AS role,
       r.rolsuper AS superuser,
       r.rolbypassrls AS bypass_rls,
       ARRAY(SELECT b.rolname::text FROM pg_roles b
             WHERE b.rolname IN ('pg_read_server_files', 'pg_write_server_files',
                                 'pg_execute_server_program', 'pg_read_all_data',
                                 'pg_write_all_data', 'pg_read_all_stats', 'pg_monitor',
                                 'pg_read_all_settings', 'pg_signal_backend')
               AND pg_has_role(current_user, b.oid, 'USAGE')) AS builtin_roles,
       ARRAY(SELECT n.nspname || '.' || c.relname
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f')
               AND n.nspname <> ALL (%(schemas)s::text[])
               AND n.nspname NOT IN ('pg_catalog', 'information_schema')
               AND n.nspname NOT LIKE 'pg\_toast%%'
               AND has_schema_privilege(n.oid, 'USAGE')
               AND has_table_privilege(c.oid, 'SELECT')
             ORDER BY 1 LIMIT 5) AS readable_elsewhere
FROM pg_roles r
WHERE r.rolname = current_user

-- Every row of one table, streamed by the export service through a server-side cursor.
SELECT * FROM {table}

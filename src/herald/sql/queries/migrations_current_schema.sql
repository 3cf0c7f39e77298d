SELECT current_schema() AS schema

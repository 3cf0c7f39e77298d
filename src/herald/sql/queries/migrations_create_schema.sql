-- {schema} is an identifier composed safely by the loader, never a raw string.
CREATE SCHEMA IF NOT EXISTS {schema}

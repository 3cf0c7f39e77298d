-- {schema} is an identifier composed safely by the loader. For this transaction only:
-- through a pooler, the session's settings belong to whoever uses the connection next.
SET LOCAL search_path TO {schema}, public

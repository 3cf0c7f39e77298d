-- Give up a holder's duties (on a graceful stop), so another process takes them at once.
DELETE FROM duties WHERE holder = %(holder)s AND name = ANY(%(names)s::text[])

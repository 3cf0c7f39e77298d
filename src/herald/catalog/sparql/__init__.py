"""The read-only SPARQL endpoint's engine: queries run in child processes.

- :mod:`.guard`: checks a query's text before anything runs it (form, federation, size,
  depth), in linear time.
- :mod:`.child`: the query process: resource limits, the store's snapshot or the remote
  endpoint, results streamed to a file under row and byte limits.
- :mod:`.runner`: the API side: a bounded pool of query processes, deadlines, snapshots.
"""

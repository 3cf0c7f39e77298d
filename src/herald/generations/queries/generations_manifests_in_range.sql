-- Retained input of a dataset whose event time overlaps a source range, for partitions.
SELECT * FROM gen_input_manifests
WHERE dataset = %(dataset)s AND event_time_to >= %(from)s AND event_time_from <= %(to)s
  AND partitions && %(partitions)s::text[] AND retain_until > herald_now()
ORDER BY id

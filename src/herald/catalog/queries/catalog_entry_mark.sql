-- Mark a dataset's entry as to be described again (a version was deleted), or clear the
-- mark when nothing is left to describe.
UPDATE datasets SET entry_outdated = %(outdated)s WHERE id = %(dataset_id)s

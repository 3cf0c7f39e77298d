-- A rogue client: lock some waiting rows and sit on them.
SELECT id FROM jobs WHERE state = 'waiting' ORDER BY id LIMIT %(n)s FOR UPDATE

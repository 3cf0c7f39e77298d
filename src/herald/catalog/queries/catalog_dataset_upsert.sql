-- Register a dataset, or update its description; its version counter is kept.
INSERT INTO datasets (id, title, description, publisher_name, publisher_uri, license_uri,
                      keywords, themes, contact_point, languages, details, source, tier,
                      schedule_id)
VALUES (%(id)s, %(title)s, %(description)s, %(publisher_name)s, %(publisher_uri)s,
        %(license_uri)s, %(keywords)s, %(themes)s, %(contact_point)s, %(languages)s,
        %(details)s, %(source)s, %(tier)s, %(schedule_id)s)
ON CONFLICT (id) DO UPDATE SET
    title = EXCLUDED.title,
    description = EXCLUDED.description,
    publisher_name = EXCLUDED.publisher_name,
    publisher_uri = EXCLUDED.publisher_uri,
    license_uri = EXCLUDED.license_uri,
    keywords = EXCLUDED.keywords,
    themes = EXCLUDED.themes,
    contact_point = EXCLUDED.contact_point,
    languages = EXCLUDED.languages,
    details = EXCLUDED.details,
    source = EXCLUDED.source,
    tier = EXCLUDED.tier,
    schedule_id = EXCLUDED.schedule_id,
    updated_at = herald_now()
RETURNING *, (xmax = 0) AS created

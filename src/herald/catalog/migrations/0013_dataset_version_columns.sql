-- The columns a version exported, each with its name in the XML file where that differs
-- (XML names are mapped from the source's column names): [{"name": ..., "xml_name": ...}].
-- Released as part of 0008 (housekeeping); a database that applied that file has it.
ALTER TABLE dataset_versions
    ADD COLUMN IF NOT EXISTS columns jsonb CHECK (jsonb_typeof(columns) = 'array');

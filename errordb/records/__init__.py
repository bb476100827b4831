"""Records: the schema, reading record files, checking them, their patterns."""

"""The SQLite store: records normalised into tables with sqlite-utils, and read back.

``database`` is the file (its tables, opening it, its errors), ``ingestion`` fills it from record
files, ``read`` reads records back, ``default`` says which store a command uses (the embedded
default when none is given). Everything other packages use is importable from here.
"""

from errordb.records.loader import bundled_records_dir
from errordb.store.database import (
    BUSY_TIMEOUT, FTS_RECORD_COLUMNS, FTS_TOKENIZER, LIST_FIELDS, SCALAR_FIELDS, STORE_VERSION, StoreError,
    cache_dir, connect, connect_read_only, damage_found, ensure_schema, unreadable,
)
from errordb.store.default import default_db_path, open_connection, open_db, resolve_db_path
from errordb.store.ingestion import IngestReport, ingest
from errordb.store.read import (
    find_record_id, get_envelope, get_family, get_record, iter_envelopes, iter_path_names, iter_record_dicts, iter_record_files, meta,
)

__all__ = [
    "BUSY_TIMEOUT", "FTS_RECORD_COLUMNS", "FTS_TOKENIZER", "IngestReport", "LIST_FIELDS", "SCALAR_FIELDS", "STORE_VERSION",
    "StoreError", "bundled_records_dir", "cache_dir", "connect", "connect_read_only", "damage_found", "default_db_path", "ensure_schema",
    "find_record_id", "get_envelope", "get_family", "get_record", "ingest", "iter_envelopes", "iter_path_names", "iter_record_dicts", "iter_record_files",
    "meta", "open_connection", "open_db", "resolve_db_path", "unreadable",
]

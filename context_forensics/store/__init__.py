"""The SQLite store (sqlite-utils, migrations) and ingest: paths → importers → store."""

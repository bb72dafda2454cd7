"""The fuzz harness: structure-aware mutations of real logs, fed to ``ctxf``'s ingest API.

``seeds`` finds the seed inputs per importer (the corpus, ``sample_logs/``, ``tests/fixtures``,
and a few containers built at run time: an Inspect ``.eval``, an ``llm`` logs.db, an SQLite
table); ``mutate`` (documents, bytes) and ``containers`` (zips, SQLite, YAML, folders) turn a
seed into one input; ``oracle`` feeds it to every importer's ``sniff`` and to
``context_forensics.ingest`` and says what escaped; ``engine`` runs the oracle in worker
processes with a time and memory limit; ``run.py`` is the command line.
"""

"""Embeddings: the packaged MiniLM loaded offline, chunking, and the content-hash keyed cache."""

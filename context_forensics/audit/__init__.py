"""Audit: rules over sessions, the runner and its executors, JSON / JUnit / Markdown reports."""

"""Diverge: events normalized across harnesses, alignment, causes, decisive edits and patches."""

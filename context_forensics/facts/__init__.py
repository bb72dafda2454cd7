"""Facts: presence rules (cosine, lexical, polarity), per-step states, timelines, suggest, calibrate."""

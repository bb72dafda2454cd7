"""The configuration: forensics_config.yaml validated, the dated model table it extends, and the
schema of its `audit:` section."""

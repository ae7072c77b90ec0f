"""Child processes and the OS sandbox around them (stdlib only, before torch is imported)."""

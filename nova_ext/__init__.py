"""nova-ext: an extension pack for an unmodified upstream Nova 34."""

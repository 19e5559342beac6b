"""nova-ext command-line tools."""

"""nova-ext plugins running in nova-api."""

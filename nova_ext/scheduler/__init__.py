"""nova-ext scheduler plugins: filters and weighers."""

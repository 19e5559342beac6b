"""nova-ext scheduler plugins: filters, weighers and (later) request filters."""

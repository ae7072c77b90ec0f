"""Children that never import candidate code: the referee, the pristine reference, the probe."""

"""The drivers: campaigns and their workers, model checks, regress, bench, stats, and the command line."""

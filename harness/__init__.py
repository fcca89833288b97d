"""The capture pipeline: eager and torch.compile runs with graph deduplication."""

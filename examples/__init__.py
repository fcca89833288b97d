"""Examples of plugging a backend into the harness (see README, "Backends")."""

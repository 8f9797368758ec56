"""`specops config check` and `specops init`: the config file and the deploy files."""

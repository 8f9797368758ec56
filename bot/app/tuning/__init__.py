"""`specops tune`: the sweep, the k per load, and the probe workload rollout shares."""

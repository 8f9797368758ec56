"""Watching deployments: samples, health reports, incidents, the records adapters read, replicas."""

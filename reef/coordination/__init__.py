"""Coordination between replicas that share stores: learner elections and release announcements."""

"""Live rollouts: a release the gate accepted earns its traffic from live reports (canary share, sticky
assignment, a sequential test). Pure values and functions; the application layer stores and routes."""

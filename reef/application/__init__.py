"""The application layer the HTTP edge calls: the runtime (one per process), its scenarios and their learners,
replicas' elections, the serving contexts of releases, discovery's search. It composes the learning pipeline,
the stores and the engine; it knows nothing of HTTP."""

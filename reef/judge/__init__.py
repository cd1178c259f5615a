"""The process-reward judge of `openclawrl`: sessions rebuilt from traffic, votes on each turn's next state,
hindsight hints, and the worker that runs the judge beside a scenario's learner without blocking serving.

It knows the learning contracts (`reef.learning.base.FeedbackSource`) and the core values; never the service,
the stores or the recipes.
"""

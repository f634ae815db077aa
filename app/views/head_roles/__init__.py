"""Head roles: a script per kind of model."""

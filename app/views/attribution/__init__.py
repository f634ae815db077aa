"""Attribution: a script per kind of model."""

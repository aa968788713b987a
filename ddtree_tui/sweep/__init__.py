"""The tuning lab: sweep a service over launch and load settings, rank, apply (see README, "Tuning lab")."""

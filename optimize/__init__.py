"""Trainsets, optimizer runs, saving and loading compiled programs."""

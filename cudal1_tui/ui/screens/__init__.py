"""Modal screens: help, confirm, rounds, settings, export, open session."""

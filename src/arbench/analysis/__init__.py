"""Analyses that need no training (closed forms and simulations of state updates)."""

"""Dead letters, their replay, and the periodic repairs (sweeper, reconciler)."""

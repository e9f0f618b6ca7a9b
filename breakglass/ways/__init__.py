"""The ways out: each plans exact steps, backs up, applies with compare-and-swap, verifies, reverts."""

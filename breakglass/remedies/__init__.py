"""Reversible remedies. Each remedy plans exact steps, backs up before it changes anything,
applies with compare-and-swap, verifies, and reverts from the journal alone."""

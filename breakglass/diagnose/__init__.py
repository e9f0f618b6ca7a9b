"""Diagnosis: from log records to named findings and a verdict.

``signatures`` knows what lines mean, ``causes`` names why a webhook call failed,
``engine`` correlates events into findings in one streaming pass, and ``model``
holds the result objects the CLI renders.
"""

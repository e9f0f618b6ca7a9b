"""Reading apiserver logs: where they come from (sources), how candidate lines are
found fast (scanner) and how each line's wrapping is peeled off (formats)."""

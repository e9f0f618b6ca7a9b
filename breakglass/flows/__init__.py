"""The use cases every front end drives: recovery runs, the planner, plan files, the wizard."""

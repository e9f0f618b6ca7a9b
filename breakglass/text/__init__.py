"""Text shared across layers: YAML edited as text (Talos, k3s), the admission-plugin flag algebra, and how a line is cut short."""

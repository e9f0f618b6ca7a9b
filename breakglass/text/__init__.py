"""Text editing shared by Talos and k3s: YAML edited as text, and the admission-plugin flag algebra."""

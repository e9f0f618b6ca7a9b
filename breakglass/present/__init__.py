"""Result objects to text, and the questions interface the wizard asks through."""

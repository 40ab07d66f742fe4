"""The answers' shapes, pages of a long result, and their text for the model."""

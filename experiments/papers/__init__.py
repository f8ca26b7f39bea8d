"""The papers' tables and figures as named experiments (one module per paper), ``compare`` (every
engine side by side) and ``authors`` (the authors' own binaries as a column of them)."""

"""The fleet stage: every node of a multi-node launch audited over its own connection, side by side, and whether the
nodes agree (audit.py). Nothing is imported here: the report package reads ``results`` alone."""

"""The player of engine code: a release's own functions played out on a launch's values, never run or imported.

- ``values``: the value domain (Python's values, the engine objects a player stands in for, one ``Unknown`` that says
  why), and ``truth``;
- ``operators``: what Python's operators, builtins and the methods of plain values do, one table each;
- ``player``: the statement player, with its policy for an unknown condition, its depth limits and its coverage;
- ``libraries``: what it knows of the libraries engine code leans on, one small module a library.

It depends on nothing but the standard library: every stage that reads engine code plays it here.
"""

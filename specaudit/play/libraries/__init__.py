"""What the player knows of the libraries engine code leans on, one small module a library (as astroid's ``brain_*``
modules are around its one inference engine): ``environ``, the environment variables an ``envs`` module declares."""

#!/usr/bin/env bash
# probe.sh PROGRAM ARGS...: run the Python script on stdin (remote_probe.py) with the interpreter of PROGRAM,
# the launch command's first word: a python, or a console script whose shebang names its interpreter.
program=$1; shift
found=$(command -v "$program") || { echo "$program: not found on the remote PATH" >&2; exit 127; }
case ${found##*/} in
  python*) python=("$found") ;;
  *) read -r -a python < <(sed -n '1s/^#![[:space:]]*//p' "$found") ;;  # the shebang's words
esac
exec "${python[@]}" - "$@"

#!/usr/bin/env bash
# Re-measures every figure the README quotes beside torch, several runs each: see scripts/figures.py.
exec /usr/bin/python3 "$(dirname "$0")/figures.py" "$@"

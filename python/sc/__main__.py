"""`python -m sc`: the `sc` command line, as the `sc-weights` command runs it."""

from ._cli import main

if __name__ == "__main__":
    main("python -m sc")

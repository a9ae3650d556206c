"""``python -m memdir`` runs the command-line interface."""

from memdir.cli import main

if __name__ == "__main__":
    main()

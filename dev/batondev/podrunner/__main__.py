"""``python -m batondev.podrunner``: the ``dev/podrunner`` command."""

from batondev.podrunner.cli import main

if __name__ == "__main__":
    main()

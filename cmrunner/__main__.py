"""`python -m cmrunner` is the same entry as the `cm` console script."""

from cmrunner.entry import main

main()

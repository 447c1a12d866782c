"""The version of stanlite: one line, below every module that reports it (the program
cache keys its files by it, ``stanlite --version`` prints it) so that none of them
imports the package root."""

__version__ = "0.1.0"

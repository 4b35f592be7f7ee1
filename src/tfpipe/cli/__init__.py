"""The `tfpipe` command. Thin: parse arguments, call the packages, print."""

"""One module per ``tune`` verb, each exposing ``command`` (a click.Command)."""

"""Subcommands of the ``medlama`` command, one module each (see ``medlama.cli``)."""

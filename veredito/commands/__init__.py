"""The handlers of ``veredito``'s commands, one module per group; :mod:`veredito.cli` parses the
command line and imports only the group it runs."""

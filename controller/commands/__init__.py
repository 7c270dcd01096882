"""One module per `faultline` subcommand: HELP, add_arguments(parser), run(args) -> int."""

"""The run store: run directories, history I/O, reports, web view and Spark scoring."""
